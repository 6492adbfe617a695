package harness

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/initorigin/io-harness-go/pkg/harness/git"
	"github.com/initorigin/io-harness-go/pkg/harness/mcp"
	"github.com/initorigin/io-harness-go/pkg/harness/policy"
	"github.com/initorigin/io-harness-go/pkg/harness/provider"
	"github.com/initorigin/io-harness-go/pkg/harness/provider/anthropic"
	"github.com/initorigin/io-harness-go/pkg/harness/provider/models"
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
	// MCPServers are MCP servers whose tools the agent may call, as
	// mcp__<server>__<tool>: stdio servers run in the run's sandbox
	// unless they say host, HTTP servers are reached through the net
	// policy (package mcp).
	MCPServers []mcp.Server `json:"mcp_servers,omitempty"`
	// OmitTools names built-in tools the run does not offer.
	OmitTools []string `json:"omit_tools,omitempty"`
	// Containment makes the run the root of a tree of agents under these
	// caps; absent means the agent cannot spawn.
	Containment *Containment `json:"containment,omitempty"`
	// Git offers the git tools with this commit identity (package git).
	Git *git.Config `json:"git,omitempty"`
	// ViewImage offers view_image (package media).
	ViewImage bool `json:"view_image,omitempty"`
	// TraceImages keeps the bytes of the images shown to the model in the
	// trace; without it the trace keeps their hashes and sizes.
	TraceImages bool `json:"trace_images,omitempty"`
	// Skills are skill directories, and Bundles bundle directories
	// (package skill). A relative path resolves against the working
	// directory of the process.
	Skills  []string `json:"skills,omitempty"`
	Bundles []string `json:"bundles,omitempty"`
	// Telemetry exports the run as OpenTelemetry traces (package
	// telemetry); absent means export only when the environment names a
	// collector (OTEL_EXPORTER_OTLP_ENDPOINT) and the host lets the
	// environment be read. The Go API wires it itself: see
	// telemetry.New and Options.Sinks.
	Telemetry *TelemetrySpec `json:"telemetry,omitempty"`
	// Models is a model catalogue override file (package models): its
	// entries replace or add to the built-in catalogue the vendors price
	// and size their requests from. Empty means IO_HARNESS_MODELS when
	// the environment is read, else none. A relative path resolves
	// against the working directory of the process.
	Models string `json:"models,omitempty"`
}

// TelemetrySpec configures OpenTelemetry export. Every field left empty is
// read from the standard OTEL_EXPORTER_OTLP_* variables when the host
// lets the environment be read.
type TelemetrySpec struct {
	// Endpoint is the OTLP collector: for http/protobuf a URL
	// (http://localhost:4318; /v1/traces is added when it has no path),
	// for grpc host:port or a URL (http:// means no TLS).
	Endpoint string `json:"endpoint,omitempty"`
	// Protocol is "http/protobuf" (the default) or "grpc".
	Protocol string `json:"protocol,omitempty"`
	// Headers are sent with every export, such as a hosted collector's
	// key. They are never stored.
	Headers map[string]string `json:"headers,omitempty"`
	// Timeout bounds one export; zero means 10s.
	Timeout Duration `json:"timeout,omitempty"`
	// ServiceName is the resource's service.name; empty means
	// OTEL_SERVICE_NAME, else "io-harness".
	ServiceName string `json:"service_name,omitempty"`
	// Content puts the model's text and tool calls' arguments and results
	// in spans. Off, spans carry no prompt or file content.
	Content bool `json:"content,omitempty"`
	// Disabled turns export off, whatever the environment says.
	Disabled bool `json:"disabled,omitempty"`
}

// EnvModels names the model catalogue override file a spec without
// "models" uses, when the host lets the environment be read.
const EnvModels = "IO_HARNESS_MODELS"

// ProviderSpec names a provider and configures it. It is flat: each field
// applies to the providers its comment names, and a field set for a
// provider that does not use it is an error.
type ProviderSpec struct {
	// Name is the provider: "openai", "anthropic", "openrouter",
	// "openai_compatible", "scripted" or "replay".
	Name string `json:"name"`

	// Model is the vendor's model id. It defaults to OPENAI_MODEL,
	// ANTHROPIC_MODEL, OPENROUTER_MODEL or OPENAI_COMPATIBLE_MODEL; there
	// is no built-in default model.
	Model string `json:"model,omitempty"`
	// APIKey is the vendor key; it defaults to OPENAI_API_KEY,
	// ANTHROPIC_API_KEY, OPENROUTER_API_KEY or OPENAI_COMPATIBLE_API_KEY
	// (never OPENAI_API_KEY for another server). It is never stored,
	// logged or put in an error. openai_compatible needs none.
	APIKey provider.Secret `json:"api_key,omitempty"`
	// BaseURL overrides the API root, for proxies, gateways and tests; it
	// defaults to OPENAI_BASE_URL, ANTHROPIC_BASE_URL,
	// OPENROUTER_BASE_URL or OPENAI_COMPATIBLE_BASE_URL, then to the
	// vendor's. With or without the version path (/v1), and with a
	// trailing slash, it reaches the same endpoint. Required for
	// openai_compatible without a preset.
	BaseURL string `json:"base_url,omitempty"`
	// Preset picks a local server for openai_compatible: "ollama",
	// "vllm", "llamacpp" or "lmstudio".
	Preset string `json:"preset,omitempty"`
	// MaxOutputTokens is the output cap of a request the budgets do not
	// cap. Zero means the model's largest (from the model catalogue) for
	// anthropic, which must send one, and none for the others. No cap
	// sent is ever above the model's largest.
	MaxOutputTokens int64 `json:"max_output_tokens,omitempty"`
	// StallTimeout fails a stream that sends no bytes for this long
	// (a transient failure); zero means 90s.
	StallTimeout Duration `json:"stall_timeout,omitempty"`
	// RequestTimeout bounds one call; zero means 10m.
	RequestTimeout Duration `json:"request_timeout,omitempty"`
	// Headers are extra request headers; they cannot replace the auth
	// headers.
	Headers map[string]string `json:"headers,omitempty"`
	// Price overrides the model catalogue's list price, in USD per
	// million tokens.
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
// Every problem is an *Error of kind ErrConfig naming its field by its
// whole JSON path ("task.budgets.max_steps", "fallbacks[0].model").
func ParseSpec(data []byte) (Spec, error) { return parseSpec(data, true) }

// ParseResumeSpec reads the spec of a [Resume] as [ParseSpec] does, except
// that its task is optional and not checked: a resumed run keeps the task
// it was stored with.
func ParseResumeSpec(data []byte) (Spec, error) { return parseSpec(data, false) }

func parseSpec(data []byte, withTask bool) (Spec, error) {
	data, err := namedPolicy(data)
	if err != nil {
		return Spec{}, err
	}
	var s Spec
	if err := decodeStrict(data, &s); err != nil {
		if !json.Valid(data) {
			return Spec{}, err
		}
		if field, problem := firstProblem(data, reflect.TypeFor[Spec]()); field != "" {
			return Spec{}, configError(field, "%s", problem)
		}
		return Spec{}, err
	}
	// The provider's name first: its error names the nearest, where the
	// schema's would list the enum.
	if s.Provider.Name != "" && !slices.Contains(providerNames(), s.Provider.Name) {
		return Spec{}, unknownProvider("provider.name", s.Provider.Name)
	}
	for i, f := range s.Fallbacks {
		if f.Name != "" && !slices.Contains(providerNames(), f.Name) {
			return Spec{}, unknownProvider(fmt.Sprintf("fallbacks[%d].name", i), f.Name)
		}
	}
	if err := checkSchema(data, withTask); err != nil {
		return Spec{}, err
	}
	if withTask {
		task, err := s.Task.resolved()
		if err != nil {
			var e *Error
			if errors.As(err, &e) && e.Field != "" {
				e.Field = "task." + e.Field
			}
			return Spec{}, err
		}
		s.Task = task
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
	if err := mcp.Validate(s.MCPServers); err != nil {
		var ce *mcp.ConfigError
		if errors.As(err, &ce) {
			return Spec{}, &Error{Kind: ErrConfig, Field: ce.Field, Message: ce.Reason}
		}
		return Spec{}, &Error{Kind: ErrConfig, Field: "mcp_servers", Err: err}
	}
	for i, name := range s.OmitTools {
		if !tool.IsBuiltin(name) {
			return Spec{}, configError(fmt.Sprintf("omit_tools[%d]", i), "%q is not a built-in tool", name)
		}
	}
	if s.Containment != nil {
		if err := s.Containment.validate("containment"); err != nil {
			return Spec{}, err
		}
		if withTask && s.Task.SingleFile() {
			return Spec{}, configError("containment", "a tree of agents needs a workspace task (root), not a single file")
		}
	}
	if s.Git != nil {
		if err := s.Git.Validate(); err != nil {
			var ge *git.ConfigError
			if errors.As(err, &ge) {
				return Spec{}, configError("git."+ge.Field, "%s", ge.Reason)
			}
			return Spec{}, &Error{Kind: ErrConfig, Field: "git", Err: err}
		}
	}
	for i, d := range s.Skills {
		if d == "" {
			return Spec{}, configError(fmt.Sprintf("skills[%d]", i), "empty")
		}
	}
	for i, d := range s.Bundles {
		if d == "" {
			return Spec{}, configError(fmt.Sprintf("bundles[%d]", i), "empty")
		}
	}
	if t := s.Telemetry; t != nil {
		switch {
		case t.Protocol != "" && t.Protocol != "http/protobuf" && t.Protocol != "grpc":
			return Spec{}, configError("telemetry.protocol", "want http/protobuf or grpc, got %q", t.Protocol)
		case t.Timeout < 0:
			return Spec{}, configError("telemetry.timeout", "must not be negative")
		}
	}
	return s, nil
}

// namedPolicy replaces a spec's "policy": "default" or "permissive" by
// that built-in policy written out (see [policy.Named]), so that a spec
// names a built-in policy as `io-harness policy explain` does. Data that
// is not a JSON object is left for the decoder to describe.
func namedPolicy(data []byte) ([]byte, error) {
	var top map[string]json.RawMessage
	if json.Unmarshal(data, &top) != nil {
		return data, nil
	}
	raw := bytes.TrimSpace(top["policy"])
	if len(raw) == 0 || raw[0] != '"' {
		return data, nil
	}
	var name string
	if err := json.Unmarshal(raw, &name); err != nil {
		return data, nil
	}
	pol, err := policy.Named(name)
	if err != nil {
		var pe *policy.Error
		if errors.As(err, &pe) {
			return nil, configError("policy", "%s", pe.Reason)
		}
		return nil, &Error{Kind: ErrConfig, Field: "policy", Err: err}
	}
	if top["policy"], err = json.Marshal(&pol); err != nil {
		return nil, err
	}
	return json.Marshal(top)
}

// Options builds the providers the spec names and returns Options for
// [Run] with them; the caller adds the store and the observer. lookup
// reads the environment (os.LookupEnv, typically) for the keys, models and
// base URLs the spec leaves empty, and for IO_HARNESS_MODELS; nil reads
// nothing.
//
// # Errors
//
// A provider that cannot be built, or a model catalogue override that
// cannot be read, is an *Error of kind ErrConfig naming its field; a
// missing key or model names the environment variable it may come from.
func (s *Spec) Options(lookup func(string) (string, bool)) (Options, error) {
	env := envOf(lookup)
	cat, err := s.Catalogue(lookup)
	if err != nil {
		return Options{}, err
	}
	p, err := s.Provider.build("provider", env, cat)
	if err != nil {
		return Options{}, err
	}
	opts := Options{Provider: p, Backoff: s.Backoff, Policy: s.Policy, Sandbox: s.Sandbox,
		MCPServers: s.MCPServers, OmitTools: s.OmitTools, LookupEnv: lookup, Containment: s.Containment, Git: s.Git,
		ViewImage: s.ViewImage, TraceImages: s.TraceImages, Skills: s.Skills, Bundles: s.Bundles}
	for i := range s.WasmTools {
		w := s.WasmTools[i]
		opts.Tools = append(opts.Tools, &w)
	}
	for i := range s.Fallbacks {
		f, err := s.Fallbacks[i].build(fmt.Sprintf("fallbacks[%d]", i), env, cat)
		if err != nil {
			return Options{}, err
		}
		opts.Fallbacks = append(opts.Fallbacks, f)
	}
	return opts, nil
}

// Catalogue returns the model catalogue the spec's providers use: the
// built-in one, with the override file of Models, or else of
// IO_HARNESS_MODELS as lookup reports it (nil reads nothing), merged
// into it.
//
// # Errors
//
// An override file that cannot be read or is not a valid catalogue is an
// *Error of kind ErrConfig with Field "models", wrapping the
// *models.Error that names the file and the JSON path in it.
func (s *Spec) Catalogue(lookup func(string) (string, bool)) (*models.Catalogue, error) {
	path, from := s.Models, ""
	if path == "" && lookup != nil {
		path, _ = lookup(EnvModels)
		from = " (from " + EnvModels + ")"
	}
	cat := models.Builtin()
	if path == "" {
		return cat, nil
	}
	o, err := models.Load(path)
	if err != nil {
		return nil, &Error{Kind: ErrConfig, Field: "models", Message: "the model catalogue override" + from + " is unusable", Err: err}
	}
	return cat.Merge(o), nil
}

// environment is how a spec reads the environment: allowed says whether
// the host lets it.
type environment struct {
	lookup  func(string) (string, bool)
	allowed bool
}

func envOf(lookup func(string) (string, bool)) environment {
	if lookup == nil {
		return environment{lookup: func(string) (string, bool) { return "", false }}
	}
	return environment{lookup: lookup, allowed: true}
}

func (e environment) get(k string) string { v, _ := e.lookup(k); return v }

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
	case "openai_compatible":
		return [3]string{openai.EnvCompatibleAPIKey, openai.EnvCompatibleModel, openai.EnvCompatibleBaseURL}, true
	}
	return names, false
}

// required reports a field of a vendor provider that is neither in the
// spec nor in the environment, naming the variable it may come from.
func (e environment) required(field, variable string) *Error {
	if e.allowed {
		return configError(field, "required: set it here, or in %s", variable)
	}
	return configError(field, "required: set it here (%s is read only when the host lets the environment be read: the CLI does; over the C ABI, open the harness with use_environment)", variable)
}

// build constructs the provider p names, its models priced and sized
// from cat. p is a copy: the keys and models it reads from the
// environment do not end up in the caller's spec.
func (p ProviderSpec) build(field string, env environment, cat *models.Catalogue) (provider.Provider, error) {
	if !slices.Contains(providerNames(), p.Name) {
		return nil, unknownProvider(field+".name", p.Name)
	}
	if err := p.unused(field); err != nil {
		return nil, err
	}
	if names, ok := envNames(p.Name); ok {
		if p.APIKey == "" {
			p.APIKey = provider.Secret(env.get(names[0]))
		}
		if p.Model == "" {
			p.Model = env.get(names[1])
		}
		if p.BaseURL == "" {
			p.BaseURL = env.get(names[2])
		}
		switch {
		case p.Model == "":
			return nil, env.required(field+".model", names[1])
		case p.APIKey == "" && p.Name != "openai_compatible":
			return nil, env.required(field+".api_key", names[0])
		case p.BaseURL == "" && p.Name == "openai_compatible" && p.Preset == "":
			return nil, env.required(field+".base_url", names[2]+", or a preset")
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
			RequestTimeout: time.Duration(p.RequestTimeout), Headers: p.Headers, Price: p.Price, Catalogue: cat}
		if p.Name == "openai" {
			prov, err = openai.New(cfg)
		} else {
			prov, err = openai.NewCompatible(cfg)
		}
	case "anthropic":
		prov, err = anthropic.New(anthropic.Config{APIKey: p.APIKey, Model: p.Model, BaseURL: p.BaseURL,
			MaxOutputTokens: p.MaxOutputTokens, StallTimeout: time.Duration(p.StallTimeout),
			RequestTimeout: time.Duration(p.RequestTimeout), Headers: p.Headers, Price: p.Price, Catalogue: cat})
	case "openrouter":
		prov, err = openrouter.New(openrouter.Config{APIKey: p.APIKey, Model: p.Model, BaseURL: p.BaseURL,
			Referer: p.Referer, Title: p.Title, Models: p.Models, Provider: p.Routing,
			MaxOutputTokens: p.MaxOutputTokens, StallTimeout: time.Duration(p.StallTimeout),
			RequestTimeout: time.Duration(p.RequestTimeout), Headers: p.Headers, Price: p.Price, Catalogue: cat})
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
	}
	if err != nil {
		return nil, &Error{Kind: ErrConfig, Field: field, Err: err}
	}
	return prov, nil
}

// providerNames are the providers a spec can name, in the order an error
// lists them.
func providerNames() []string {
	return []string{"openai", "anthropic", "openrouter", "openai_compatible", "scripted", "replay"}
}

// unknownProvider is the error of a provider name that is none of
// providerNames: it names the nearest when one is close (a typo, another
// case, a dash for an underscore).
func unknownProvider(field, name string) error {
	if name == "" {
		return configError(field, "required")
	}
	names := providerNames()
	best, bestD := "", len(name)
	for _, n := range names {
		if d := editDistance(strings.ToLower(strings.ReplaceAll(name, "-", "_")), n); d < bestD {
			best, bestD = n, d
		}
	}
	list := strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
	if best != "" && bestD <= max(2, len(best)/3) {
		return configError(field, "unknown provider %q (did you mean %q?); want %s", name, best, list)
	}
	return configError(field, "unknown provider %q; want %s", name, list)
}

// editDistance is the optimal string alignment distance of a and b: the
// insertions, deletions, substitutions and swaps of two neighbouring bytes
// that turn one into the other.
func editDistance(a, b string) int {
	prev2, prev, cur := make([]int, len(b)+1), make([]int, len(b)+1), make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
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
