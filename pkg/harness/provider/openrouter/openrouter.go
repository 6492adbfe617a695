// Package openrouter is a [provider.Provider] for OpenRouter, which
// speaks OpenAI's Chat Completions with a few additions: attribution
// headers, routing (a fallback model list and provider preferences), and
// the cost of each turn reported in its usage.
//
// The cost of a turn is the cost OpenRouter reports. Before a request is
// sent, [Client.Price] estimates it from the config's price or the model
// catalogue (package models), which also gives the model's limits.
// Tool-call ids another vendor made are mapped to ids every upstream
// accepts. The client never retries: a failure comes back as a
// *provider.Error whose kind tells the harness whether a retry may help.
//
// Quick start:
//
//	cfg := openrouter.ConfigFromEnv(os.LookupEnv) // OPENROUTER_API_KEY, OPENROUTER_MODEL, OPENROUTER_BASE_URL
//	cfg.Title = "my-agent"
//	p, err := openrouter.New(cfg)
package openrouter

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/initorigin/io-harness-go/pkg/harness/provider"
	"github.com/initorigin/io-harness-go/pkg/harness/provider/internal/chat"
	"github.com/initorigin/io-harness-go/pkg/harness/provider/internal/toolid"
	"github.com/initorigin/io-harness-go/pkg/harness/provider/internal/wire"
	"github.com/initorigin/io-harness-go/pkg/harness/provider/models"
)

// Defaults for the zero fields of a [Config].
const (
	// DefaultBaseURL is OpenRouter's API; "/chat/completions" is
	// appended.
	DefaultBaseURL = "https://openrouter.ai/api/v1"
	// DefaultStallTimeout is how long a stream may send no bytes.
	// OpenRouter's keep-alive comments count as bytes.
	DefaultStallTimeout = 90 * time.Second
	// DefaultRequestTimeout bounds a whole call, the stream included.
	DefaultRequestTimeout = 10 * time.Minute
)

// Environment variables read by [ConfigFromEnv].
const (
	EnvAPIKey  = "OPENROUTER_API_KEY"
	EnvModel   = "OPENROUTER_MODEL"
	EnvBaseURL = "OPENROUTER_BASE_URL"
)

// Config configures a [Client]. Model and APIKey are required; the zero
// value of every other field is usable.
type Config struct {
	// APIKey is sent as a bearer token. It is never serialised, logged or
	// put in an error.
	APIKey provider.Secret `json:"-"`
	// Model is the model id, such as "openai/gpt-4o-mini". There is no
	// default.
	Model string `json:"model"`
	// BaseURL is the API root that "/chat/completions" is appended to;
	// a bare host or ".../api" gets "/api/v1", and a trailing slash or a
	// whole endpoint URL is accepted. Empty means DefaultBaseURL.
	BaseURL string `json:"base_url,omitempty"`
	// Referer is sent as HTTP-Referer: the app's URL, for attribution.
	Referer string `json:"http_referer,omitempty"`
	// Title is sent as X-Title: the app's name, for attribution.
	Title string `json:"x_title,omitempty"`
	// Models is the fallback list sent as "models": OpenRouter tries the
	// next model when one fails.
	Models []string `json:"models,omitempty"`
	// Provider is the provider-preferences object sent as "provider"
	// (order, only, ignore, sort, allow_fallbacks, …), passed on as is.
	Provider json.RawMessage `json:"provider,omitempty"`
	// MaxOutputTokens is the max_tokens sent when a request sets none;
	// zero sends none. A cap is never sent above the model's largest one
	// in the catalogue, nor above the room its context window leaves
	// after the request's input.
	MaxOutputTokens int64 `json:"max_output_tokens,omitempty"`
	// StallTimeout is how long a stream may send no bytes before the call
	// fails with provider.KindStall; zero means DefaultStallTimeout.
	StallTimeout time.Duration `json:"stall_timeout,omitempty"`
	// RequestTimeout bounds a whole call; zero means
	// DefaultRequestTimeout.
	RequestTimeout time.Duration `json:"request_timeout,omitempty"`
	// Headers are extra request headers. They cannot replace
	// Authorization, Content-Type or Accept.
	Headers map[string]string `json:"headers,omitempty"`
	// Price is used by [Client.Price] to estimate a turn before it is
	// sent, and for a turn whose usage reports no cost; nil means the
	// catalogue's price of Model.
	Price *provider.Price `json:"price,omitempty"`
	// Catalogue is the model catalogue Model is looked up in; nil means
	// [models.Builtin].
	Catalogue *models.Catalogue `json:"-"`
	// HTTPClient sends the requests; nil means a zero http.Client. The
	// client is copied and the copy never follows redirects.
	HTTPClient *http.Client `json:"-"`
}

// ConfigFromEnv returns a Config whose APIKey, Model and BaseURL come from
// OPENROUTER_API_KEY, OPENROUTER_MODEL and OPENROUTER_BASE_URL as lookup
// (typically os.LookupEnv) reports them.
func ConfigFromEnv(lookup func(key string) (string, bool)) Config {
	get := func(k string) string { v, _ := lookup(k); return v }
	return Config{APIKey: provider.Secret(get(EnvAPIKey)), Model: get(EnvModel), BaseURL: get(EnvBaseURL)}
}

// Client is an OpenRouter provider. It is safe for concurrent use, and
// implements [provider.Provider], [provider.Pricer] and
// [provider.Limiter].
type Client struct{ c *chat.Client }

var (
	_ provider.Provider = (*Client)(nil)
	_ provider.Pricer   = (*Client)(nil)
	_ provider.Limiter  = (*Client)(nil)
)

// New returns an OpenRouter client. It fails when the config has no model
// or no key, or an invalid field.
func New(cfg Config) (*Client, error) { return newClient(cfg, nil) }

// newClient is New; edit, when set, changes the request options last
// (export_test.go's negative controls).
func newClient(cfg Config, edit func(*chat.Options)) (*Client, error) {
	if cfg.Model == "" {
		return nil, errors.New("openrouter: Model is required")
	}
	if cfg.APIKey == "" {
		return nil, errors.New("openrouter: APIKey is required")
	}
	if cfg.BaseURL == "" {
		cfg.BaseURL = DefaultBaseURL
	}
	var prefs json.RawMessage
	if p := bytes.TrimSpace(cfg.Provider); len(p) > 0 && string(p) != "null" {
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(cfg.Provider, &obj); err != nil {
			return nil, fmt.Errorf("openrouter: Provider must be a JSON object: %w", err)
		}
		prefs = bytes.Clone(cfg.Provider)
	}
	cat := cfg.Catalogue
	if cat == nil {
		cat = models.Builtin()
	}
	m, known := cat.Lookup(models.VendorOpenRouter, cfg.Model)
	if cfg.Price == nil {
		cfg.Price = m.Price
	}
	header := http.Header{}
	for k, v := range cfg.Headers {
		header.Set(k, v)
	}
	if cfg.Referer != "" {
		header.Set("HTTP-Referer", cfg.Referer)
	}
	if cfg.Title != "" {
		header.Set("X-Title", cfg.Title)
	}
	s := chat.Settings{
		Vendor:     "openrouter",
		Model:      cfg.Model,
		Key:        cfg.APIKey.Reveal(),
		BaseURL:    cfg.BaseURL,
		API:        api(),
		Header:     header,
		HTTPClient: cfg.HTTPClient,
		Options: chat.Options{
			MaxTokensField:   chat.MaxTokens,
			MaxOutputTokens:  cfg.MaxOutputTokens,
			Models:           append([]string(nil), cfg.Models...),
			Provider:         prefs,
			IncludeUsage:     true,
			Limits:           m.Limits,
			IDs:              toolid.OpenRouter(),
			StructuredOutput: true,
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
		return nil, fmt.Errorf("openrouter: %w", err)
	}
	return &Client{c}, nil
}

// api is how the endpoint's URL is built from a base URL.
func api() wire.API { return wire.API{Root: "/api/v1", Path: "/chat/completions"} }

// Name returns "openrouter:<model>".
func (c *Client) Name() string { return c.c.Name() }

// Endpoint returns the host:port the client dials.
func (c *Client) Endpoint() string { return c.c.Endpoint() }

// Price estimates what a turn with usage u costs: the config's price,
// else the catalogue's, else an unknown cost. A finished turn's
// Response.Cost is OpenRouter's own figure.
func (c *Client) Price(u provider.Usage) provider.Cost { return c.c.Price(u) }

// Limits returns the model's context window and largest output cap from
// the catalogue; ok is false for a model it does not know.
func (c *Client) Limits() (provider.Limits, bool) { return c.c.Limits() }

// TakesImages reports whether the model catalogue says the model takes
// images; a model it does not know is assumed not to (an override file
// can say it does).
func (c *Client) TakesImages() bool { return c.c.TakesImages() }

// Complete streams one turn. See [provider.Provider] for the contract.
// A turn's cost is usage.cost when OpenRouter reported one, else the
// estimate of Price, and unknown when there was no usage report at all.
func (c *Client) Complete(ctx context.Context, req *provider.Request, onText func(string)) (*provider.Response, error) {
	return c.c.Complete(ctx, req, onText)
}

// ReadStream decodes a recorded OpenRouter event stream as Complete
// decodes a live one, and returns the turn or a *provider.Error. It is
// for replaying recorded responses.
func (c *Client) ReadStream(r io.Reader, onText func(string)) (*provider.Response, error) {
	return c.c.ReadStream(r, onText)
}
