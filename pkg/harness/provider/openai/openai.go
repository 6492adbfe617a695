// Package openai is a [provider.Provider] for OpenAI's Chat Completions
// API and for the servers that speak it: Ollama, vLLM, llama.cpp's
// llama-server, LM Studio, and gateways such as Groq or Together.
//
// [New] talks to OpenAI; [NewCompatible] talks to any compatible base URL,
// with presets for the local servers. Both stream every turn
// (stream:true with stream_options.include_usage), offer tools as
// function tools, look the model up in the model catalogue (package
// models) for its price and limits, and never retry: a failure comes back
// as a *provider.Error whose kind tells the harness whether a retry may
// help. New maps tool-call ids another vendor made to ids OpenAI accepts.
//
// Quick start:
//
//	cfg := openai.ConfigFromEnv(os.LookupEnv) // OPENAI_API_KEY, OPENAI_MODEL, OPENAI_BASE_URL
//	p, err := openai.New(cfg)
//	if err != nil { … }
//	resp, err := p.Complete(ctx, &provider.Request{…}, func(s string) { fmt.Print(s) })
package openai

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/initorigin/io-harness-go/pkg/harness/provider"
	"github.com/initorigin/io-harness-go/pkg/harness/provider/internal/chat"
	"github.com/initorigin/io-harness-go/pkg/harness/provider/internal/toolid"
	"github.com/initorigin/io-harness-go/pkg/harness/provider/internal/wire"
	"github.com/initorigin/io-harness-go/pkg/harness/provider/models"
)

// Defaults for the zero fields of a [Config].
const (
	// DefaultBaseURL is OpenAI's API.
	DefaultBaseURL = "https://api.openai.com/v1"
	// DefaultStallTimeout is how long a stream may send no bytes.
	DefaultStallTimeout = 90 * time.Second
	// DefaultRequestTimeout bounds a whole call, the stream included.
	DefaultRequestTimeout = 10 * time.Minute
)

// Environment variables read by [ConfigFromEnv].
const (
	EnvAPIKey  = "OPENAI_API_KEY"
	EnvModel   = "OPENAI_MODEL"
	EnvBaseURL = "OPENAI_BASE_URL"
)

// Environment variables read by [CompatibleConfigFromEnv]. They are not
// OpenAI's: an OpenAI key must never reach another server.
const (
	EnvCompatibleAPIKey  = "OPENAI_COMPATIBLE_API_KEY"
	EnvCompatibleModel   = "OPENAI_COMPATIBLE_MODEL"
	EnvCompatibleBaseURL = "OPENAI_COMPATIBLE_BASE_URL"
)

// Preset names a local OpenAI-compatible server for [NewCompatible].
type Preset string

// The presets, each with its server's default local base URL.
const (
	PresetOllama   Preset = "ollama"   // http://localhost:11434/v1
	PresetVLLM     Preset = "vllm"     // http://localhost:8000/v1
	PresetLlamaCpp Preset = "llamacpp" // http://localhost:8080/v1
	PresetLMStudio Preset = "lmstudio" // http://localhost:1234/v1
)

// BaseURL returns the preset's default base URL, or "" for an unknown
// preset.
func (p Preset) BaseURL() string {
	switch p {
	case PresetOllama:
		return "http://localhost:11434/v1"
	case PresetVLLM:
		return "http://localhost:8000/v1"
	case PresetLlamaCpp:
		return "http://localhost:8080/v1"
	case PresetLMStudio:
		return "http://localhost:1234/v1"
	}
	return ""
}

// Config configures a [Client]. The zero value of every field but Model
// (and APIKey for [New]) is usable.
type Config struct {
	// APIKey is sent as a bearer token. It is never serialised, logged or
	// put in an error. New requires it; NewCompatible sends none when it
	// is empty.
	APIKey provider.Secret `json:"-"`
	// Model is the model id, such as "gpt-4o". There is no default.
	Model string `json:"model"`
	// BaseURL is the API root that "/chat/completions" is appended to;
	// a bare host gets "/v1", and a trailing slash or a whole endpoint
	// URL is accepted. New defaults it to DefaultBaseURL; NewCompatible
	// to the preset's URL, and requires it when there is no preset.
	BaseURL string `json:"base_url,omitempty"`
	// Preset picks a local server for NewCompatible: its base URL when
	// BaseURL is empty, and its name in [Client.Name]. New refuses it.
	Preset Preset `json:"preset,omitempty"`
	// MaxTokensField is the name of the output-cap field:
	// "max_completion_tokens" (New's default) or "max_tokens"
	// (NewCompatible's default, which the local servers expect).
	MaxTokensField string `json:"max_tokens_field,omitempty"`
	// MaxOutputTokens is the output cap sent when a request sets none;
	// zero sends none, leaving the server's default. A cap is never sent
	// above the model's largest one in the catalogue, nor above the room
	// its context window leaves after the request's input.
	MaxOutputTokens int64 `json:"max_output_tokens,omitempty"`
	// StallTimeout is how long a stream may send no bytes before the call
	// fails with provider.KindStall; zero means DefaultStallTimeout.
	StallTimeout time.Duration `json:"stall_timeout,omitempty"`
	// RequestTimeout bounds a whole call; zero means
	// DefaultRequestTimeout.
	RequestTimeout time.Duration `json:"request_timeout,omitempty"`
	// Headers are extra request headers, such as OpenAI-Organization.
	// They cannot replace Authorization, Content-Type or Accept.
	Headers map[string]string `json:"headers,omitempty"`
	// Price overrides the catalogue's list price of Model. For
	// NewCompatible the catalogue prices a local server's models at zero
	// (a preset, or a loopback base URL), and knows no price of another
	// server's unless an override file gives it (vendor
	// "openai_compatible").
	Price *provider.Price `json:"price,omitempty"`
	// Catalogue is the model catalogue Model is looked up in; nil means
	// [models.Builtin].
	Catalogue *models.Catalogue `json:"-"`
	// HTTPClient sends the requests; nil means a zero http.Client. The
	// client is copied and the copy never follows redirects.
	HTTPClient *http.Client `json:"-"`
}

// ConfigFromEnv returns a Config whose APIKey, Model and BaseURL come from
// OPENAI_API_KEY, OPENAI_MODEL and OPENAI_BASE_URL as lookup (typically
// os.LookupEnv) reports them.
func ConfigFromEnv(lookup func(key string) (string, bool)) Config {
	get := func(k string) string { v, _ := lookup(k); return v }
	return Config{APIKey: provider.Secret(get(EnvAPIKey)), Model: get(EnvModel), BaseURL: get(EnvBaseURL)}
}

// CompatibleConfigFromEnv returns a Config for [NewCompatible] whose
// APIKey, Model and BaseURL come from OPENAI_COMPATIBLE_API_KEY,
// OPENAI_COMPATIBLE_MODEL and OPENAI_COMPATIBLE_BASE_URL as lookup
// reports them. It never reads OPENAI_API_KEY: that key is for OpenAI
// alone.
func CompatibleConfigFromEnv(lookup func(key string) (string, bool)) Config {
	get := func(k string) string { v, _ := lookup(k); return v }
	return Config{APIKey: provider.Secret(get(EnvCompatibleAPIKey)), Model: get(EnvCompatibleModel), BaseURL: get(EnvCompatibleBaseURL)}
}

// Client is an OpenAI Chat Completions provider. It is safe for
// concurrent use, and implements [provider.Provider], [provider.Pricer]
// and [provider.Limiter].
type Client struct{ c *chat.Client }

var (
	_ provider.Provider = (*Client)(nil)
	_ provider.Pricer   = (*Client)(nil)
	_ provider.Limiter  = (*Client)(nil)
)

// New returns a client of OpenAI's API. It fails when the config has no
// model or no key, or an invalid field.
func New(cfg Config) (*Client, error) { return newOpenAI(cfg, nil) }

// newOpenAI is New; edit, when set, changes the request options last
// (export_test.go's negative controls).
func newOpenAI(cfg Config, edit func(*chat.Options)) (*Client, error) {
	if cfg.APIKey == "" {
		return nil, errors.New("openai: APIKey is required")
	}
	if cfg.Preset != "" {
		return nil, errors.New("openai: Preset is for NewCompatible")
	}
	if cfg.BaseURL == "" {
		cfg.BaseURL = DefaultBaseURL
	}
	if cfg.MaxTokensField == "" {
		cfg.MaxTokensField = chat.MaxCompletionTokens
	}
	return newClient("openai", models.VendorOpenAI, toolid.OpenAI(), true, cfg, edit)
}

// NewCompatible returns a client of an OpenAI-compatible server. The key
// is optional and the base URL comes from the config or its preset. A
// server with a preset or a loopback base URL is local: the catalogue's
// VendorLocal entries (price zero) apply to it; any other server's
// models have the catalogue's VendorCompatible entries, which only an
// override file adds. Tool-call ids are sent as they are: a local
// server's chat template expects its own model's.
func NewCompatible(cfg Config) (*Client, error) { return newCompatible(cfg, nil) }

// newCompatible is NewCompatible; edit, when set, changes the request
// options last (export_test.go's negative controls).
func newCompatible(cfg Config, edit func(*chat.Options)) (*Client, error) {
	name := "openai_compatible"
	if cfg.Preset != "" {
		u := cfg.Preset.BaseURL()
		if u == "" {
			return nil, fmt.Errorf("openai: unknown preset %q", cfg.Preset)
		}
		if cfg.BaseURL == "" {
			cfg.BaseURL = u
		}
		name = string(cfg.Preset)
	}
	if cfg.BaseURL == "" {
		return nil, errors.New("openai: BaseURL or Preset is required")
	}
	if cfg.MaxTokensField == "" {
		cfg.MaxTokensField = chat.MaxTokens
	}
	catVendor := models.VendorCompatible
	if cfg.Preset != "" || loopback(cfg.BaseURL) {
		catVendor = models.VendorLocal
	}
	return newClient(name, catVendor, toolid.Rule{}, false, cfg, edit)
}

// loopback reports whether a base URL's host is this machine: localhost
// or a loopback address.
func loopback(base string) bool {
	u, err := url.Parse(base)
	if err != nil {
		return false
	}
	h := strings.ToLower(strings.TrimSuffix(u.Hostname(), "."))
	if h == "localhost" || strings.HasSuffix(h, ".localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// api is how the Chat Completions endpoint's URL is built from a base
// URL.
func api() wire.API { return wire.API{Root: "/v1", Path: "/chat/completions"} }

// newClient makes a client; structured sends a request's output schema
// as response_format (OpenAI has the mode; a compatible server may not).
// edit, when set, changes the request options last.
func newClient(vendor, catVendor string, ids toolid.Rule, structured bool, cfg Config, edit func(*chat.Options)) (*Client, error) {
	if cfg.MaxTokensField != chat.MaxCompletionTokens && cfg.MaxTokensField != chat.MaxTokens {
		return nil, fmt.Errorf("openai: MaxTokensField %q: want %q or %q", cfg.MaxTokensField, chat.MaxCompletionTokens, chat.MaxTokens)
	}
	header := http.Header{}
	for k, v := range cfg.Headers {
		header.Set(k, v)
	}
	cat := cfg.Catalogue
	if cat == nil {
		cat = models.Builtin()
	}
	m, known := cat.Lookup(catVendor, cfg.Model)
	if cfg.Price == nil {
		cfg.Price = m.Price
	}
	s := chat.Settings{
		Vendor:     vendor,
		Model:      cfg.Model,
		Key:        cfg.APIKey.Reveal(),
		BaseURL:    cfg.BaseURL,
		API:        api(),
		Header:     header,
		HTTPClient: cfg.HTTPClient,
		Options: chat.Options{
			MaxTokensField:   cfg.MaxTokensField,
			MaxOutputTokens:  cfg.MaxOutputTokens,
			Limits:           m.Limits,
			IDs:              ids,
			StructuredOutput: structured,
		},
		LimitsKnown:    known,
		Images:         known && m.Images,
		Stall:          cfg.StallTimeout,
		Timeout:        cfg.RequestTimeout,
		DefaultStall:   DefaultStallTimeout,
		DefaultTimeout: DefaultRequestTimeout,
		Price:          cfg.Price,
	}
	if edit != nil {
		edit(&s.Options)
	}
	c, err := chat.NewClient(s)
	if err != nil {
		return nil, fmt.Errorf("openai: %w", err)
	}
	return &Client{c}, nil
}

// Name returns "openai:<model>", or "<preset>:<model>" and
// "openai_compatible:<model>" for a compatible server.
func (c *Client) Name() string { return c.c.Name() }

// Endpoint returns the host:port the client dials.
func (c *Client) Endpoint() string { return c.c.Endpoint() }

// Price returns what a turn with usage u costs: the config's price, else
// the catalogue's list price of the model, else an unknown cost.
func (c *Client) Price(u provider.Usage) provider.Cost { return c.c.Price(u) }

// Limits returns the model's context window and largest output cap from
// the catalogue; ok is false for a model it does not know.
func (c *Client) Limits() (provider.Limits, bool) { return c.c.Limits() }

// TakesImages reports whether the model catalogue says the model takes
// images; a model it does not know is assumed not to (an override file
// can say it does).
func (c *Client) TakesImages() bool { return c.c.TakesImages() }

// Complete streams one turn. See [provider.Provider] for the contract.
func (c *Client) Complete(ctx context.Context, req *provider.Request, onText func(string)) (*provider.Response, error) {
	return c.c.Complete(ctx, req, onText)
}

// ReadStream decodes a recorded Chat Completions event stream as
// Complete decodes a live one, and returns the turn or a
// *provider.Error. It is for replaying recorded responses.
func (c *Client) ReadStream(r io.Reader, onText func(string)) (*provider.Response, error) {
	return c.c.ReadStream(r, onText)
}
