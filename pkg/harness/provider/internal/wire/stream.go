package wire

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/initorigin/io-harness-go/pkg/harness/provider"
	"github.com/initorigin/io-harness-go/pkg/harness/provider/internal/bound"
	"github.com/initorigin/io-harness-go/pkg/harness/provider/internal/sse"
)

var (
	errStalled  = errors.New("stream stalled")
	errTimedOut = errors.New("request timed out")
)

// Request is one streaming POST.
type Request struct {
	// Provider is the provider's Name, for errors.
	Provider string
	// URL is the endpoint.
	URL string
	// Header holds every request header, the auth header included.
	Header http.Header
	// Body is the JSON request body.
	Body []byte
	// Secret is the API key, redacted from every error (see [Clean]).
	Secret string
	// Client sends the request; it must not follow redirects (see
	// [NoRedirects]).
	Client *http.Client
	// StallTimeout is the longest the response may send no bytes, from
	// the moment the request is sent. Zero means no limit.
	StallTimeout time.Duration
	// Timeout bounds the whole call. Zero means no limit beyond ctx.
	Timeout time.Duration
}

// Stream is the body of a successful streaming response. Every read that
// returns bytes restarts the stall timer, so comments and keep-alives
// count as activity.
//
// A Stream is not safe for concurrent use. Close must be called.
type Stream struct {
	body     io.ReadCloser
	parent   context.Context // the caller's context
	ctx      context.Context // the request's context
	cancel   context.CancelCauseFunc
	stop     context.CancelFunc // releases the timeout
	timer    *time.Timer        // the stall timer, or nil
	stall    time.Duration
	provider string
	secret   string
}

// Open sends r and returns the response body when it is an event stream.
// Any other response, and any failure to get one, is returned as a
// *provider.Error.
func Open(ctx context.Context, r *Request) (*Stream, error) {
	s := &Stream{parent: ctx, stall: r.StallTimeout, provider: r.Provider, secret: r.Secret, stop: func() {}}
	cctx := ctx
	if r.Timeout > 0 {
		cctx, s.stop = context.WithTimeoutCause(ctx, r.Timeout, errTimedOut)
	}
	s.ctx, s.cancel = context.WithCancelCause(cctx)
	if s.stall > 0 {
		s.timer = time.AfterFunc(s.stall, func() { s.cancel(errStalled) })
	}
	req, err := http.NewRequestWithContext(s.ctx, http.MethodPost, r.URL, bytes.NewReader(r.Body))
	if err != nil {
		s.Close()
		return nil, s.Fail(err)
	}
	req.Header = r.Header
	resp, err := r.Client.Do(req)
	if err != nil {
		err = s.Fail(err)
		s.Close()
		return nil, err
	}
	s.body = resp.Body
	if resp.StatusCode/100 == 2 && isEventStream(resp.Header.Get("Content-Type")) {
		return s, nil
	}
	defer s.Close()
	// One byte past the bound tells a body that is too long; the rest is
	// never read, and Close drops the connection under it.
	body, rerr := io.ReadAll(io.LimitReader(s, provider.MaxErrorBody+1))
	if rerr != nil && len(body) == 0 && resp.StatusCode/100 == 2 {
		return nil, s.Fail(rerr)
	}
	return nil, s.statusError(resp, body)
}

// isEventStream reports whether a content type is an event stream. A
// missing content type is taken as one: some local servers send none.
func isEventStream(ct string) bool {
	if ct == "" {
		return true
	}
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && mt == "text/event-stream"
}

// statusError classifies a response that is not an event stream. body
// is at most one byte longer than provider.MaxErrorBody; a body that long
// is not parsed, so the status alone classifies it. Every piece of the
// response that reaches the message (the vendor's text, the content
// type, a redirect's host) is cleaned.
func (s *Stream) statusError(resp *http.Response, body []byte) *provider.Error {
	e := &provider.Error{
		Provider:   s.provider,
		Status:     resp.StatusCode,
		RetryAfter: RetryAfter(resp.Header, time.Now()),
	}
	long := len(body) > provider.MaxErrorBody
	var apiErr APIError
	ok := false
	if !long {
		apiErr, ok = ParseError(body)
	}
	switch {
	case resp.StatusCode/100 == 3:
		e.Kind = provider.KindBadRequest
		e.Message = "redirect not followed"
		if loc, err := resp.Location(); err == nil {
			e.Message += " (to host " + loc.Host + ", which was never authorised)"
		}
		e.Message = Clean(e.Message, s.secret)
		return e
	case resp.StatusCode/100 == 2 && !ok:
		e.Kind = provider.KindMalformed
		e.Message = Clean("expected an event stream, got "+contentType(resp)+tooLong(long), s.secret)
		return e
	case resp.StatusCode/100 == 2:
		e.Kind = Kind(0, resp.Header.Get("X-Should-Retry"), apiErr)
	default:
		e.Kind = Kind(resp.StatusCode, resp.Header.Get("X-Should-Retry"), apiErr)
	}
	e.Message = Clean(apiErr.Text(), s.secret)
	if e.Message == "" {
		e.Message = http.StatusText(resp.StatusCode)
		if !ok && len(body) > 0 && (long || !json.Valid(body)) {
			e.Message += " (" + contentType(resp) + " body" + tooLong(long) + ")"
		}
		e.Message = Clean(e.Message, s.secret)
	}
	return e
}

// tooLong says that a body was over provider.MaxErrorBody, when it was.
func tooLong(long bool) string {
	if !long {
		return ""
	}
	return ", over " + bound.Size(provider.MaxErrorBody) + " (provider.MaxErrorBody) and not read"
}

// contentType names the content type of a response for a message.
func contentType(resp *http.Response) string {
	if ct := resp.Header.Get("Content-Type"); ct != "" {
		return fmt.Sprintf("%q", ct)
	}
	return "no content type"
}

// Read reads the body and restarts the stall timer when bytes arrive.
func (s *Stream) Read(p []byte) (int, error) {
	n, err := s.body.Read(p)
	if n > 0 && s.timer != nil {
		s.timer.Reset(s.stall)
	}
	return n, err
}

// Close stops the stall timer and closes the body.
func (s *Stream) Close() error {
	if s.timer != nil {
		s.timer.Stop()
	}
	var err error
	if s.body != nil {
		err = s.body.Close()
	}
	s.cancel(context.Canceled)
	s.stop()
	return err
}

// Fail turns an error met while sending the request or reading the
// stream into a *provider.Error. A *provider.Error passes through with its
// provider filled in; a line or event over the reader's bound is
// KindResponseTooLarge; otherwise the kind says why: the caller's context
// ended (timeout or transport, wrapping ctx.Err()), the stream stalled,
// the request timed out, the body ended early (truncated), or the
// connection failed (transport). The message and the underlying error's
// text are cleaned (see [Clean]) on every path.
func (s *Stream) Fail(err error) error {
	return fail(s.provider, s.secret, err, s.parent, s.ctx, s.stall)
}

// Fail is [Stream.Fail] for a stream read without a [Stream]: a decoder
// of a recorded response.
func Fail(name, secret string, err error) error {
	return fail(name, secret, err, nil, nil, 0)
}

func fail(name, secret string, err error, parent, ctx context.Context, stall time.Duration) error {
	if pe := provider.AsError(err); pe != nil {
		pe.Provider = name
		pe.Message = Clean(pe.Message, secret)
		pe.Err = cleanErr(pe.Err, secret)
		return pe
	}
	if errors.Is(err, sse.ErrTooLarge) {
		e := bound.TooLarge("an event-stream line or event over " + bound.Size(sse.MaxEventSize) +
			" (sse.MaxEventSize), or an event with over " + strconv.Itoa(sse.MaxFields) + " unknown fields (sse.MaxFields)")
		e.Provider = name
		return e
	}
	e := &provider.Error{Provider: name, Kind: provider.KindTransport, Err: err}
	var cause error
	if ctx != nil {
		cause = context.Cause(ctx)
	}
	switch {
	case parent != nil && parent.Err() != nil:
		e.Err = parent.Err()
		if errors.Is(e.Err, context.DeadlineExceeded) {
			e.Kind = provider.KindTimeout
		}
	case errors.Is(cause, errStalled):
		e.Kind = provider.KindStall
		e.Message = fmt.Sprintf("no bytes for %s", stall)
		e.Err = nil
	case errors.Is(cause, errTimedOut):
		e.Kind = provider.KindTimeout
		e.Message = "request timeout"
		e.Err = context.DeadlineExceeded
	case errors.Is(err, io.ErrUnexpectedEOF):
		e.Kind = provider.KindTruncated
		e.Message = "connection closed mid-stream"
	default:
		var ue *url.Error
		if errors.As(err, &ue) {
			// The URL in a url.Error is the endpoint, never a key; its op
			// and URL add nothing the provider name does not say.
			e.Err = ue.Err
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			e.Kind = provider.KindTimeout
		}
	}
	e.Err = cleanErr(e.Err, secret)
	return e
}

// cleanErr returns err when its text is already clean (see [Clean]), and
// otherwise an error of the cleaned text. Go's HTTP client quotes what a
// server sent in some errors (a malformed status line or header), so a
// server can put the key there. The cleaned error still answers
// errors.Is as err did, but errors.As does not reach the errors inside:
// their text is not clean.
func cleanErr(err error, secret string) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	if c := Clean(msg, secret); c != msg {
		return &cleanError{msg: c, err: err}
	}
	return err
}

// cleanError is an error whose text was cleaned.
type cleanError struct {
	msg string
	err error
}

func (e *cleanError) Error() string { return e.msg }

// Is reports whether the error it stands for matches target.
func (e *cleanError) Is(target error) bool { return errors.Is(e.err, target) }

// NoRedirects returns a copy of c (or of a zero client when c is nil)
// that does not follow redirects, so that a 3xx reaches the caller: the
// new host was never authorised.
func NoRedirects(c *http.Client) *http.Client {
	var nc http.Client
	if c != nil {
		nc = *c
	}
	nc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &nc
}

// API says how a vendor's request URL is built from a base URL.
type API struct {
	// Root is the path of the vendor's API root on its own host: "/v1",
	// or OpenRouter's "/api/v1".
	Root string
	// Path is the endpoint below the root: "/messages",
	// "/chat/completions".
	Path string
	// AlwaysRoot adds Root to every base path that does not end with it:
	// for Anthropic, whose base URLs (ANTHROPIC_BASE_URL, a proxy's
	// prefix) name the host and never the version. Otherwise Root is
	// added only to a base with no path, or with a leading part of Root
	// ("/api" for "/api/v1"): an OpenAI-compatible server may keep its
	// API anywhere ("/v1beta/openai", "/openai/v1").
	AlwaysRoot bool
}

// URL checks a base URL and returns the URL of api's endpoint on it,
// together with the host:port it dials. The base may end in a slash, in
// the API root or in the whole endpoint path: "https://api.anthropic.com",
// ".../v1", ".../v1/" and ".../v1/messages" all give
// "https://api.anthropic.com/v1/messages", never ".../v1/v1/messages".
// Feeding the URL back as a base gives the same URL.
func URL(raw string, api API) (endpointURL, hostPort string, err error) {
	// The messages never quote raw: it may hold a password.
	u, err := url.Parse(raw)
	if err != nil {
		return "", "", errors.New("base URL does not parse")
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return "", "", errors.New("base URL: want http:// or https:// and a host")
	}
	if u.User != nil || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || u.Opaque != "" {
		return "", "", fmt.Errorf("base URL: user info, query and fragment are not allowed")
	}
	if u.Port() == "" && strings.HasSuffix(u.Host, ":") {
		return "", "", errors.New("base URL: empty port")
	}
	path := strings.TrimRight(u.EscapedPath(), "/")
	if p, ok := strings.CutSuffix(path, api.Path); ok && api.Path != "" {
		path = strings.TrimRight(p, "/")
	}
	switch {
	case api.AlwaysRoot && !strings.HasSuffix(path, api.Root):
		path += api.Root
	case path == "" || strings.HasPrefix(api.Root, path+"/"):
		path = api.Root
	}
	port := u.Port()
	if port == "" {
		port = "443"
		if u.Scheme == "http" {
			port = "80"
		}
	}
	return u.Scheme + "://" + u.Host + path + api.Path, net.JoinHostPort(u.Hostname(), port), nil
}
