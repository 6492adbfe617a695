// Package openai is a [provider.Provider] for OpenAI's Chat Completions
// API and for the servers that speak it: Ollama, vLLM, llama.cpp's
// llama-server, LM Studio, and gateways such as Groq or Together.
//
// [New] talks to OpenAI; [NewCompatible] talks to any compatible base URL,
// with presets for the local servers. Both stream every turn
// (stream:true with stream_options.include_usage), offer tools as
// function tools, and never retry: a failure comes back as a
// *provider.Error whose kind tells the harness whether a retry may help.
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
	"embed"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/initorigin/io-harness-go/pkg/harness/provider"
	"github.com/initorigin/io-harness-go/pkg/harness/provider/internal/chat"
	"github.com/initorigin/io-harness-go/pkg/harness/provider/internal/pricetable"
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
	// BaseURL is the API root that "/chat/completions" is appended to.
	// New defaults it to DefaultBaseURL; NewCompatible to the preset's
	// URL, and requires it when there is no preset.
	BaseURL string `json:"base_url,omitempty"`
	// Preset picks a local server for NewCompatible: its base URL when
	// BaseURL is empty, and its name in [Client.Name]. New refuses it.
	Preset Preset `json:"preset,omitempty"`
	// MaxTokensField is the name of the output-cap field:
	// "max_completion_tokens" (New's default) or "max_tokens"
	// (NewCompatible's default, which the local servers expect).
	MaxTokensField string `json:"max_tokens_field,omitempty"`
	// MaxOutputTokens is the output cap sent when a request sets none;
	// zero sends none, leaving the server's default.
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
	// Price overrides the embedded list price of Model. NewCompatible
	// knows no price unless this is set.
	Price *provider.Price `json:"price,omitempty"`
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

// Client is an OpenAI Chat Completions provider. It is safe for
// concurrent use, and implements [provider.Provider] and
// [provider.Pricer].
type Client struct{ c *chat.Client }

var (
	_ provider.Provider = (*Client)(nil)
	_ provider.Pricer   = (*Client)(nil)
)

// New returns a client of OpenAI's API. It fails when the config has no
// model or no key, or an invalid field.
func New(cfg Config) (*Client, error) {
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
	if cfg.Price == nil {
		if p, ok := ListPrice(cfg.Model); ok {
			cfg.Price = &p
		}
	}
	return newClient("openai", cfg)
}

// NewCompatible returns a client of an OpenAI-compatible server. The key
// is optional, the base URL comes from the config or its preset, and a
// turn's cost is unknown unless the config sets a Price.
func NewCompatible(cfg Config) (*Client, error) {
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
	return newClient(name, cfg)
}

func newClient(vendor string, cfg Config) (*Client, error) {
	if cfg.MaxTokensField != chat.MaxCompletionTokens && cfg.MaxTokensField != chat.MaxTokens {
		return nil, fmt.Errorf("openai: MaxTokensField %q: want %q or %q", cfg.MaxTokensField, chat.MaxCompletionTokens, chat.MaxTokens)
	}
	header := http.Header{}
	for k, v := range cfg.Headers {
		header.Set(k, v)
	}
	c, err := chat.NewClient(chat.Settings{
		Vendor:     vendor,
		Model:      cfg.Model,
		Key:        cfg.APIKey.Reveal(),
		BaseURL:    cfg.BaseURL,
		Header:     header,
		HTTPClient: cfg.HTTPClient,
		Options: chat.Options{
			MaxTokensField:  cfg.MaxTokensField,
			MaxOutputTokens: cfg.MaxOutputTokens,
		},
		Stall:          cfg.StallTimeout,
		Timeout:        cfg.RequestTimeout,
		DefaultStall:   DefaultStallTimeout,
		DefaultTimeout: DefaultRequestTimeout,
		Price:          cfg.Price,
	})
	if err != nil {
		return nil, fmt.Errorf("openai: %w", err)
	}
	return &Client{c}, nil
}

//go:embed prices.json
var prices embed.FS

// ListPrice returns the embedded list price of an OpenAI model; a dated
// snapshot such as "gpt-4o-2024-08-06" has its base model's price.
func ListPrice(model string) (provider.Price, bool) {
	p, ok, err := pricetable.Lookup(prices, "prices.json", model)
	return p, ok && err == nil
}

// Name returns "openai:<model>", or "<preset>:<model>" and
// "openai_compatible:<model>" for a compatible server.
func (c *Client) Name() string { return c.c.Name() }

// Endpoint returns the host:port the client dials.
func (c *Client) Endpoint() string { return c.c.Endpoint() }

// Price returns what a turn with usage u costs: the config's price, else
// the embedded list price of the model (for New only), else an unknown
// cost.
func (c *Client) Price(u provider.Usage) provider.Cost { return c.c.Price(u) }

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
