package chat

import (
	"context"
	"errors"
	"io"
	"net/http"
	"time"

	"github.com/initorigin/io-harness-go/pkg/harness/provider"
	"github.com/initorigin/io-harness-go/pkg/harness/provider/internal/wire"
)

// Settings are what a vendor package resolved from its own Config: the
// parts every Chat Completions client has.
type Settings struct {
	// Vendor prefixes the client's name: "openai", "ollama",
	// "openrouter".
	Vendor string
	// Model is the model id; required.
	Model string
	// Key is sent as a bearer token when not empty.
	Key string
	// BaseURL is the base URL the endpoint is built from by API.
	BaseURL string
	// API says how: the vendor's root and "/chat/completions".
	API wire.API
	// Header holds the vendor's extra headers; the auth, content-type and
	// accept headers are set over them.
	Header http.Header
	// HTTPClient sends the requests; it is copied and never follows
	// redirects.
	HTTPClient *http.Client
	// Options shape the request body.
	Options Options
	// Stall and Timeout are the stall and whole-call limits; zero means
	// the defaults passed beside them.
	Stall, Timeout               time.Duration
	DefaultStall, DefaultTimeout time.Duration
	// Price is the model's price, or nil for an unknown cost.
	Price *provider.Price
	// LimitsKnown says whether Options.Limits are the model's, from the
	// catalogue; [Client.Limits] reports them only then.
	LimitsKnown bool
	// Images says whether the model takes images, from the catalogue.
	Images bool
}

// Client is a Chat Completions provider: the client the openai and
// openrouter packages share. It is safe for concurrent use, and
// implements provider.Provider and provider.Pricer.
type Client struct {
	name     string
	key      string
	url      string
	endpoint string
	header   http.Header
	http     *http.Client
	opts     Options
	known    bool
	images   bool
	stall    time.Duration
	timeout  time.Duration
	price    *provider.Price
}

var (
	_ provider.Provider = (*Client)(nil)
	_ provider.Pricer   = (*Client)(nil)
	_ provider.Limiter  = (*Client)(nil)
)

// NewClient checks s and returns its client. Its errors name the field
// at fault; the vendor package prefixes them with its own name.
func NewClient(s Settings) (*Client, error) {
	if s.Model == "" {
		return nil, errors.New("Model is required")
	}
	url, endpoint, err := wire.URL(s.BaseURL, s.API)
	if err != nil {
		return nil, err
	}
	if s.Options.MaxOutputTokens < 0 || s.Stall < 0 || s.Timeout < 0 {
		return nil, errors.New("MaxOutputTokens, StallTimeout and RequestTimeout must not be negative")
	}
	if p := s.Price; p != nil && !p.Valid() {
		return nil, errors.New("Price must not be negative, and a long-context threshold must be positive")
	}
	if s.Options.Model == "" {
		s.Options.Model = s.Model
	}
	c := &Client{
		name:     s.Vendor + ":" + s.Model,
		key:      s.Key,
		url:      url,
		endpoint: endpoint,
		header:   s.Header.Clone(),
		http:     wire.NoRedirects(s.HTTPClient),
		opts:     s.Options,
		known:    s.LimitsKnown,
		images:   s.Images,
		stall:    orDefault(s.Stall, s.DefaultStall),
		timeout:  orDefault(s.Timeout, s.DefaultTimeout),
	}
	if c.header == nil {
		c.header = http.Header{}
	}
	if s.Price != nil {
		p := *s.Price
		c.price = &p
	}
	c.header.Set("Content-Type", "application/json")
	c.header.Set("Accept", "text/event-stream")
	c.header.Del("Authorization")
	if s.Key != "" {
		c.header.Set("Authorization", "Bearer "+s.Key)
	}
	return c, nil
}

// orDefault returns v, or def when v is zero.
func orDefault(v, def time.Duration) time.Duration {
	if v == 0 {
		return def
	}
	return v
}

// Name returns "<vendor>:<model>".
func (c *Client) Name() string { return c.name }

// Endpoint returns the host:port the client dials.
func (c *Client) Endpoint() string { return c.endpoint }

// Price returns what a turn with usage u costs at the client's price, or
// an unknown cost when it has none.
func (c *Client) Price(u provider.Usage) provider.Cost {
	if c.price == nil {
		return provider.Cost{}
	}
	return c.price.Cost(u)
}

// Limits returns the model's limits from the catalogue; ok is false for a
// model it does not know.
func (c *Client) Limits() (provider.Limits, bool) { return c.opts.Limits, c.known }

// TakesImages reports whether the catalogue says the model takes images.
func (c *Client) TakesImages() bool { return c.images }

// Complete streams one turn. See [provider.Provider] for the contract.
func (c *Client) Complete(ctx context.Context, req *provider.Request, onText func(string)) (*provider.Response, error) {
	if req == nil {
		return nil, &provider.Error{Provider: c.name, Kind: provider.KindBadRequest, Message: "nil request"}
	}
	body, err := Body(req, &c.opts)
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
	t, err := Decode(s, onText)
	if err != nil {
		return nil, s.Fail(err)
	}
	return c.response(t), nil
}

// ReadStream decodes a recorded event stream as Complete decodes a live
// one, and returns the turn or a *provider.Error. It is for replaying
// recorded responses.
func (c *Client) ReadStream(r io.Reader, onText func(string)) (*provider.Response, error) {
	t, err := Decode(r, onText)
	if err != nil {
		return nil, wire.Fail(c.name, c.key, err)
	}
	return c.response(t), nil
}

// response converts an assembled turn. Its cost is the one the server
// reported (OpenRouter's usage.cost), else the client's price of its
// usage; a turn without a usage report has an unknown cost, never a zero
// one. The model's name is the server's text, not the model's, so it is
// cleaned of the key like an error message (replay records it).
func (c *Client) response(t *Turn) *provider.Response {
	resp := &provider.Response{
		Text:         t.Text,
		ToolCalls:    t.ToolCalls,
		Usage:        t.Usage,
		StopReason:   t.Stop,
		Model:        wire.Clean(t.Model, c.key),
		DroppedCalls: t.Dropped,
	}
	switch {
	case t.Cost != nil:
		resp.Cost = provider.Cost{USD: *t.Cost, Known: true}
	case t.UsageSeen:
		resp.Cost = c.Price(t.Usage)
	}
	return resp
}
