// Package anthropic is a [provider.Provider] for Anthropic's Messages API.
//
// Every turn streams, always sends max_tokens (sized from the model's
// largest output cap in the model catalogue, package models), offers the
// request's tools, and marks the stable prefix of a run (the system prompt
// and the tool list) for prompt caching; cache reads and writes are
// reported in the turn's usage and priced by Anthropic's formula. Tool-call
// ids another vendor made ("functions.read_file:0") are mapped to ids the
// API accepts. The client never retries: a failure comes back as a
// *provider.Error whose kind tells the harness whether a retry may help.
//
// Quick start:
//
//	cfg := anthropic.ConfigFromEnv(os.LookupEnv) // ANTHROPIC_API_KEY, ANTHROPIC_MODEL, ANTHROPIC_BASE_URL
//	p, err := anthropic.New(cfg)
//	if err != nil { … }
//	resp, err := p.Complete(ctx, &provider.Request{…}, func(s string) { fmt.Print(s) })
package anthropic

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/initorigin/io-harness-go/pkg/harness/provider"
	"github.com/initorigin/io-harness-go/pkg/harness/provider/internal/toolid"
	"github.com/initorigin/io-harness-go/pkg/harness/provider/internal/wire"
	"github.com/initorigin/io-harness-go/pkg/harness/provider/models"
)

// Defaults for the zero fields of a [Config].
const (
	// DefaultBaseURL is Anthropic's API; "/v1/messages" is appended.
	DefaultBaseURL = "https://api.anthropic.com"
	// DefaultMaxOutputTokens is the max_tokens sent when neither the
	// request nor the config sets one and the model catalogue does not
	// know the model: the API requires the field.
	DefaultMaxOutputTokens = 4096
	// DefaultStallTimeout is how long a stream may send no bytes.
	DefaultStallTimeout = 90 * time.Second
	// DefaultRequestTimeout bounds a whole call, the stream included.
	DefaultRequestTimeout = 10 * time.Minute
	// Version is the anthropic-version header sent with every request.
	Version = "2023-06-01"
)

// Environment variables read by [ConfigFromEnv].
const (
	EnvAPIKey  = "ANTHROPIC_API_KEY"
	EnvModel   = "ANTHROPIC_MODEL"
	EnvBaseURL = "ANTHROPIC_BASE_URL"
)

// Config configures a [Client]. Model and APIKey are required; the zero
// value of every other field is usable.
type Config struct {
	// APIKey is sent as x-api-key. It is never serialised, logged or put
	// in an error.
	APIKey provider.Secret `json:"-"`
	// Model is the model id, such as "claude-sonnet-4-5". There is no
	// default.
	Model string `json:"model"`
	// BaseURL is the host (and a proxy's path prefix) that "/v1/messages"
	// is appended to; a trailing "/v1", "/v1/messages" or slash is
	// accepted and not doubled. Empty means DefaultBaseURL.
	BaseURL string `json:"base_url,omitempty"`
	// MaxOutputTokens is the max_tokens sent when a request sets none;
	// zero means the model's largest output cap from the catalogue, or
	// DefaultMaxOutputTokens for a model it does not know. Whatever is
	// asked, max_tokens is never more than the model's cap, nor than the
	// room its context window leaves after the request's input.
	MaxOutputTokens int64 `json:"max_output_tokens,omitempty"`
	// StallTimeout is how long a stream may send no bytes (pings count)
	// before the call fails with provider.KindStall; zero means
	// DefaultStallTimeout.
	StallTimeout time.Duration `json:"stall_timeout,omitempty"`
	// RequestTimeout bounds a whole call; zero means
	// DefaultRequestTimeout.
	RequestTimeout time.Duration `json:"request_timeout,omitempty"`
	// Headers are extra request headers, such as anthropic-beta. They
	// cannot replace x-api-key, anthropic-version, Content-Type or
	// Accept.
	Headers map[string]string `json:"headers,omitempty"`
	// Price overrides the catalogue's list price of Model. A one-hour
	// cache write is always priced at twice Price.Input.
	Price *provider.Price `json:"price,omitempty"`
	// Catalogue is the model catalogue Model is looked up in, for its price,
	// output cap and context window; nil means [models.Builtin]. Give
	// models.Builtin().Merge(override) to apply an override file.
	Catalogue *models.Catalogue `json:"-"`
	// HTTPClient sends the requests; nil means a zero http.Client. The
	// client is copied and the copy never follows redirects.
	HTTPClient *http.Client `json:"-"`
}

// ConfigFromEnv returns a Config whose APIKey, Model and BaseURL come from
// ANTHROPIC_API_KEY, ANTHROPIC_MODEL and ANTHROPIC_BASE_URL as lookup
// (typically os.LookupEnv) reports them.
func ConfigFromEnv(lookup func(key string) (string, bool)) Config {
	get := func(k string) string { v, _ := lookup(k); return v }
	return Config{APIKey: provider.Secret(get(EnvAPIKey)), Model: get(EnvModel), BaseURL: get(EnvBaseURL)}
}

// Client is an Anthropic Messages provider. It is safe for concurrent
// use, and implements [provider.Provider] and [provider.Pricer].
type Client struct {
	name      string
	model     string
	key       string
	url       string
	endpoint  string
	header    http.Header
	http      *http.Client
	maxTokens int64 // the config's; 0 means the model's
	limits    provider.Limits
	known     bool // the catalogue knows the model
	images    bool // the catalogue says the model takes images
	stall     time.Duration
	timeout   time.Duration
	price     *provider.Price
}

var (
	_ provider.Provider = (*Client)(nil)
	_ provider.Pricer   = (*Client)(nil)
	_ provider.Limiter  = (*Client)(nil)
)

// New returns a client of the Messages API. It fails when the config has
// no model or no key, or an invalid field.
func New(cfg Config) (*Client, error) {
	if cfg.Model == "" {
		return nil, errors.New("anthropic: Model is required")
	}
	if cfg.APIKey == "" {
		return nil, errors.New("anthropic: APIKey is required")
	}
	if cfg.BaseURL == "" {
		cfg.BaseURL = DefaultBaseURL
	}
	url, endpoint, err := wire.URL(cfg.BaseURL, api())
	if err != nil {
		return nil, fmt.Errorf("anthropic: %w", err)
	}
	if cfg.MaxOutputTokens < 0 || cfg.StallTimeout < 0 || cfg.RequestTimeout < 0 {
		return nil, errors.New("anthropic: MaxOutputTokens, StallTimeout and RequestTimeout must not be negative")
	}
	if p := cfg.Price; p != nil && !p.Valid() {
		return nil, errors.New("anthropic: Price must not be negative, and a long-context threshold must be positive")
	}
	cat := cfg.Catalogue
	if cat == nil {
		cat = models.Builtin()
	}
	m, known := cat.Lookup(models.VendorAnthropic, cfg.Model)
	c := &Client{
		name:      "anthropic:" + cfg.Model,
		model:     cfg.Model,
		key:       cfg.APIKey.Reveal(),
		url:       url,
		endpoint:  endpoint,
		header:    http.Header{},
		http:      wire.NoRedirects(cfg.HTTPClient),
		maxTokens: cfg.MaxOutputTokens,
		limits:    m.Limits,
		known:     known,
		images:    known && m.Images,
		stall:     orDefault(cfg.StallTimeout, DefaultStallTimeout),
		timeout:   orDefault(cfg.RequestTimeout, DefaultRequestTimeout),
		price:     m.Price,
	}
	if cfg.Price != nil {
		p := *cfg.Price
		c.price = &p
	}
	for k, v := range cfg.Headers {
		c.header.Set(k, v)
	}
	c.header.Set("X-Api-Key", cfg.APIKey.Reveal())
	c.header.Set("Anthropic-Version", Version)
	c.header.Set("Content-Type", "application/json")
	c.header.Set("Accept", "text/event-stream")
	return c, nil
}

// orDefault returns v, or def when v is zero.
func orDefault[T int64 | time.Duration](v, def T) T {
	if v == 0 {
		return def
	}
	return v
}

// api is how the Messages endpoint's URL is built from a base URL.
func api() wire.API { return wire.API{Root: "/v1", Path: "/messages", AlwaysRoot: true} }

// Name returns "anthropic:<model>".
func (c *Client) Name() string { return c.name }

// Endpoint returns the host:port the client dials.
func (c *Client) Endpoint() string { return c.endpoint }

// Price returns what a turn with usage u costs, counting every cache
// write as a five-minute write: the config's price, else the catalogue's
// list price of the model, else an unknown cost.
func (c *Client) Price(u provider.Usage) provider.Cost {
	if c.price == nil {
		return provider.Cost{}
	}
	return c.price.Cost(u)
}

// Limits returns the model's context window and largest output cap, as
// the model catalogue gives them; ok is false for a model it does not
// know.
func (c *Client) Limits() (provider.Limits, bool) { return c.limits, c.known }

// TakesImages reports whether the model catalogue says the model takes
// images; a model it does not know is assumed not to (an override file
// can say it does).
func (c *Client) TakesImages() bool { return c.images }

// outputCap is the max_tokens of req: what the request asks, else the
// config's, else the model's cap, never more than the model's cap nor
// than the room its window leaves after the input, and
// DefaultMaxOutputTokens when nothing says otherwise.
func (c *Client) outputCap(req *provider.Request) int64 {
	want := req.MaxOutputTokens
	if want <= 0 {
		want = c.maxTokens
	}
	if want <= 0 && c.limits.MaxOutputTokens == 0 {
		want = DefaultMaxOutputTokens
	}
	return c.limits.OutputCap(want, provider.EstimateInput(req))
}

// Complete streams one turn. See [provider.Provider] for the contract.
func (c *Client) Complete(ctx context.Context, req *provider.Request, onText func(string)) (*provider.Response, error) {
	if req == nil {
		return nil, &provider.Error{Provider: c.name, Kind: provider.KindBadRequest, Message: "nil request"}
	}
	body, err := requestBody(c.model, c.outputCap(req), req, toolid.Anthropic())
	if err != nil {
		return nil, &provider.Error{Provider: c.name, Kind: provider.KindBadRequest, Message: err.Error(), Err: err}
	}
	s, err := wire.Open(ctx, &wire.Request{
		Provider:     c.name,
		URL:          c.url,
		Header:       c.header.Clone(),
		Body:         body,
		Secret:       c.key,
		Client:       c.http,
		StallTimeout: c.stall,
		Timeout:      c.timeout,
	})
	if err != nil {
		return nil, err
	}
	defer s.Close()
	t, err := decode(s, onText)
	if err != nil {
		return nil, s.Fail(err)
	}
	return c.response(t), nil
}

// ReadStream decodes a recorded Messages event stream as Complete decodes
// a live one, and returns the turn or a *provider.Error. It is for
// replaying recorded responses.
func (c *Client) ReadStream(r io.Reader, onText func(string)) (*provider.Response, error) {
	t, err := decode(r, onText)
	if err != nil {
		return nil, wire.Fail(c.name, c.key, err)
	}
	return c.response(t), nil
}

// response converts an assembled turn. Its cost uses the one-hour cache
// writes the stream reported; a turn without a usage report has an
// unknown cost, never a zero one. The model's name is the server's text,
// not the model's, so it is cleaned of the key like an error message
// (replay records it).
func (c *Client) response(t *turn) *provider.Response {
	resp := &provider.Response{
		Text:         t.text,
		ToolCalls:    t.calls,
		Usage:        t.usage.normalise(),
		StopReason:   t.stop,
		Model:        wire.Clean(t.model, c.key),
		DroppedCalls: t.dropped,
	}
	if t.usageSeen && c.price != nil {
		resp.Cost = wireCost(*c.price, t.usage)
	}
	return resp
}
