// Package mcp connects a run to Model Context Protocol servers, and serves
// the harness's workspace tools to other agents as an MCP server.
//
// # The client
//
// [Connect] starts or reaches every configured [Server] and lists its
// tools; each reaches the agent as a [tool.Tool] named
// mcp__<server>__<tool>, mapped to the names every vendor accepts. Three
// checks guard it, all through the run's [tool.Gate]: starting a stdio
// server is an exec of its argv; reaching an HTTP server is a net check of
// its host and port, and the dial goes through the address floor
// (package netfloor); and every call is an exec of the tool's namespaced
// name, which the harness checks before it calls a tool that is not
// built in, so that a policy can allow a server and deny one of its
// tools.
//
// A stdio server runs in the run's sandbox through a [Launcher] (see
// [SandboxLauncher]) unless its configuration says host: true; it then
// runs through [HostLauncher], and the trace says so.
//
// Faults are observations, never hangs: a server that crashes mid-call
// fails the call and is restarted, with a bounded backoff, before the
// next; a call that gets no answer ends at its call timeout; an answer
// over the output cap, and a line on stdout that is not JSON-RPC, are
// dropped and reported; a server that exits or stays silent at start
// fails [Connect] with an [*Error] naming it and the tail of its stderr.
//
// Only this package imports the MCP SDK (github.com/mark3labs/mcp-go),
// and within it only conn.go and serve.go.
package mcp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/initorigin/io-harness-go/pkg/harness/policy"
	"github.com/initorigin/io-harness-go/pkg/harness/tool"
	"github.com/initorigin/io-harness-go/pkg/sandbox"
	"github.com/initorigin/io-harness-go/pkg/sandbox/netfloor"
)

// Options is the wiring of a [Client]: what is not data.
type Options struct {
	// Servers are the servers to connect, already validated or not
	// (Connect validates them).
	Servers []Server
	// Launcher starts the stdio servers that do not say host: true,
	// contained: a [*SandboxLauncher] on the run's sandbox. Nil makes
	// such a server fail with ErrUncontained: a server never runs on the
	// host unless its configuration says so.
	Launcher Launcher
	// Gate judges starting a stdio server (an exec of its argv) and
	// reaching an HTTP server (a net action on host:port). Nil allows
	// both (the address floor still holds). Tool calls are not judged
	// here: the harness checks each one on the tool's name.
	Gate tool.Gate
	// Getenv reads the variables that Env and Headers name as ${NAME};
	// nil reads none (a reference is then an error).
	Getenv func(string) (string, bool)
	// Path is the PATH stdio servers get; empty means
	// /usr/local/bin:/usr/bin:/bin.
	Path string
	// Observer receives every event, from the goroutine that caused it
	// (a call's, or one of the client's own). It must be safe for
	// concurrent use and not block for long.
	Observer func(Event)
	// Elicit answers a server's elicitation request: the harness sends
	// it to its approval gate as an ask. Nil declines every request.
	Elicit func(ctx context.Context, e Elicitation) (ElicitationResult, error)
	// Resolver resolves HTTP servers' host names for the address floor;
	// nil means net.DefaultResolver.
	Resolver netfloor.Resolver
	// Restart bounds the restarts of a server that died.
	Restart Restart
}

// Restart is the schedule of restarts of a server that died: Base
// doubled per consecutive failure, capped at Max, and at most Attempts
// in a row before the server is given up for the rest of the session.
type Restart struct {
	// Base is the first wait; zero means 200ms.
	Base time.Duration
	// Max caps every wait; zero means 5s.
	Max time.Duration
	// Attempts is the most consecutive restarts; zero means 5.
	Attempts int
}

func (r Restart) wait(n int) time.Duration {
	base, max := r.Base, r.Max
	if base <= 0 {
		base = 200 * time.Millisecond
	}
	if max <= 0 {
		max = 5 * time.Second
	}
	w := base
	for i := 1; i < n && w < max; i++ {
		w *= 2
	}
	return min(w, max)
}

func (r Restart) attempts() int {
	if r.Attempts > 0 {
		return r.Attempts
	}
	return 5
}

// Elicitation is a server's request for information from the user.
type Elicitation struct {
	// Server names the server that asks.
	Server string `json:"server"`
	// Message is what it asks, in its words.
	Message string `json:"message"`
	// Mode is "form" (answer Schema) or "url" (visit URL).
	Mode string `json:"mode,omitempty"`
	// URL is the page to visit in url mode.
	URL string `json:"url,omitempty"`
	// Schema is the JSON schema of the answer in form mode.
	Schema []byte `json:"schema,omitempty"`
}

// The answers to an elicitation.
const (
	ElicitAccept  = "accept"
	ElicitDecline = "decline"
	ElicitCancel  = "cancel"
)

// ElicitationResult is the answer to an elicitation.
type ElicitationResult struct {
	// Action is ElicitAccept, ElicitDecline or ElicitCancel.
	Action string `json:"action"`
	// Content is the answer, when accepted.
	Content map[string]any `json:"content,omitempty"`
}

// Client is a set of connected servers. Its methods are safe for
// concurrent use.
type Client struct {
	opts     Options
	life     context.Context // owns every server process and stream
	cancel   context.CancelFunc
	sessions []*session
	wg       sync.WaitGroup // the client's goroutines
	closed   atomic.Bool
}

// Connect validates the servers, judges each through the gate, then
// starts (or reaches) every one and lists its tools. ctx bounds the
// connecting only. Nothing starts until every server has been judged.
//
// # Errors
//
// A bad configuration is a *ConfigError naming its field. A server the
// gate refuses, or whose host the address floor refuses, is an *Error of
// kind ErrRefused; one that cannot be started, or does not complete the
// handshake and list its tools within its start timeout, is ErrStart,
// with the tail of its stderr; a stdio server without host: true and no
// Launcher is ErrUncontained. On any error every server already started
// is stopped.
func Connect(ctx context.Context, opts Options) (*Client, error) {
	if err := Validate(opts.Servers); err != nil {
		return nil, err
	}
	life, cancel := context.WithCancel(context.Background())
	c := &Client{opts: opts, life: life, cancel: cancel}
	if c.opts.Resolver == nil {
		c.opts.Resolver = net.DefaultResolver
	}
	for i := range opts.Servers {
		s := &session{c: c, cfg: opts.Servers[i], stderr: &ring{n: stderrTail}}
		c.sessions = append(c.sessions, s)
	}
	for _, s := range c.sessions {
		if err := s.judge(ctx); err != nil {
			c.Close()
			return nil, err
		}
	}
	errs := make([]error, len(c.sessions))
	var wg sync.WaitGroup
	for i, s := range c.sessions {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = s.connect(ctx)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			c.Close()
			return nil, err
		}
	}
	return c, nil
}

// Tools returns every server's tools as the agent sees them, in the
// servers' order, each server's in its own order.
func (c *Client) Tools() []tool.Tool {
	var out []tool.Tool
	for _, s := range c.sessions {
		for _, t := range s.current() {
			out = append(out, t)
		}
	}
	return out
}

// Servers describes each server as connected: its transport, protocol,
// where it runs and its tools.
func (c *Client) Servers() []ServerInfo {
	var out []ServerInfo
	for _, s := range c.sessions {
		s.mu.Lock()
		info := ServerInfo{Name: s.cfg.Name, Transport: s.cfg.Transport(), Protocol: s.protocol, Backend: s.backend,
			Host: s.cfg.Host, Notes: append([]string(nil), s.notes...)}
		for _, t := range s.tools {
			info.Tools = append(info.Tools, t)
		}
		s.mu.Unlock()
		out = append(out, info)
	}
	return out
}

// ServerInfo describes a connected server.
type ServerInfo struct {
	Name      string
	Transport string
	Protocol  string
	// Backend is where a stdio server runs: "host" or a sandbox backend.
	Backend string
	Host    bool
	Tools   []*Tool
	// Notes say which tools were dropped or renamed, and why.
	Notes []string
}

// Refresh lists again the tools of every server that said its list
// changed (notifications/tools/list_changed) or that was restarted since
// the last refresh. The harness calls it at a step boundary, and when it
// reports a change, offers the agent [Client.Tools] from the next step
// on. A server that cannot list its tools keeps its last list; the
// failure is traced.
func (c *Client) Refresh(ctx context.Context) (changed bool) {
	for _, s := range c.sessions {
		if !s.changed.Swap(false) {
			continue
		}
		if s.refresh(ctx) {
			changed = true
		}
	}
	return changed
}

// Close stops every server and waits for the client's goroutines. It is
// safe to call more than once.
func (c *Client) Close() error {
	if c.closed.Swap(true) {
		return nil
	}
	for _, s := range c.sessions {
		s.stop()
	}
	c.cancel()
	c.wg.Wait()
	return nil
}

func (c *Client) emit(e Event) {
	if c.opts.Observer == nil {
		return
	}
	e.At = time.Now()
	c.opts.Observer(e)
}

const (
	// stderrTail is how much of a server's stderr an error quotes.
	stderrTail = 2 << 10
	// stderrTraced bounds the stderr a server's session traces.
	stderrTraced = 64 << 10
	// stderrLine bounds one traced stderr line.
	stderrLine = 1 << 10
	// exitGrace is how long a call that lost its server waits to learn
	// how the server ended.
	exitGrace = 2 * time.Second
)

// session is one configured server and its current connection.
type session struct {
	c   *Client
	cfg Server

	// Set by judge, read-only afterwards.
	hostPort string // an HTTP server's host:port
	named    string // the host the policy names literally, for the floor

	startMu sync.Mutex // serializes (re)starts

	mu        sync.Mutex // guards the fields below
	conn      conn
	proc      *Process
	exited    chan struct{} // closed when the current process is gone
	exitErr   error
	gen       int
	down      string // why the connection is gone, while it is
	failures  int    // consecutive failed starts or crashes
	nextStart time.Time
	gone      error // set when the server is given up
	protocol  string
	backend   string
	tools     []*Tool
	notes     []string
	traced    int // stderr bytes traced

	changed atomic.Bool
	stderr  *ring
}

// judge asks the gate whether the server may start or be reached.
func (s *session) judge(ctx context.Context) error {
	g := s.c.opts.Gate
	if s.cfg.URL != "" {
		host, hp, _ := endpoint(s.cfg.URL)
		s.hostPort = hp
		if g == nil {
			return nil
		}
		a := tool.Action{Act: policy.Net, Target: hp}
		if err := s.authorize(ctx, a); err != nil {
			return err
		}
		// The floor's lift: a policy that names this very host means it.
		if v := g.Peek(policy.Net, hp); v.Effect == policy.Allow && (v.Rule == hp || v.Rule == host) {
			s.named = host
		}
		return nil
	}
	if !s.cfg.Host && s.c.opts.Launcher == nil {
		return &Error{Server: s.cfg.Name, Kind: ErrUncontained,
			Message: "a stdio server runs in the run's sandbox, and there is none; say host: true to run it on the host"}
	}
	if g == nil {
		return nil
	}
	return s.authorize(ctx, tool.CommandAction(s.cfg.Command))
}

// authorize asks the gate about a and traces the verdict.
func (s *session) authorize(ctx context.Context, a tool.Action) error {
	v := s.c.opts.Gate.Authorize(ctx, a)
	pv := s.c.opts.Gate.Peek(a.Act, a.Target)
	e := Event{Server: s.cfg.Name, Kind: EventVerdict, Verdict: &pv}
	switch {
	case v.Deferred != "":
		e.Outcome = "deferred"
		s.c.emit(e)
		return &Error{Server: s.cfg.Name, Kind: ErrRefused,
			Message: fmt.Sprintf("%s %s waits for a person's decision (request %s), and a server cannot wait", a.Act, a.Target, v.Deferred)}
	case v.Refused != "":
		e.Outcome = "refused"
		e.Text = v.Refused
		s.c.emit(e)
		return &Error{Server: s.cfg.Name, Kind: ErrRefused, Message: fmt.Sprintf("%s %s: %s", a.Act, a.Target, v.Refused)}
	}
	if a.Act == policy.Exec && !equal(v.Action.Argv, a.Argv) {
		e.Outcome = "refused"
		s.c.emit(e)
		return &Error{Server: s.cfg.Name, Kind: ErrRefused, Message: "an approver rewrote the server's command; a server runs only as configured"}
	}
	e.Outcome = "allowed"
	s.c.emit(e)
	return nil
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// connect starts the server for the first time: a failure is the
// session's error.
func (s *session) connect(ctx context.Context) error {
	s.startMu.Lock()
	defer s.startMu.Unlock()
	return s.start(ctx)
}

// start starts (or reaches) the server and lists its tools, within the
// start timeout. The caller holds startMu.
func (s *session) start(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.startTimeout())
	defer cancel()
	started := time.Now()
	var (
		cn   conn
		proc *Process
		gen  int
		err  error
	)
	s.mu.Lock()
	s.gen++
	gen = s.gen
	s.mu.Unlock()
	h := hooks{toolsChanged: func() { s.changed.Store(true) }}
	if s.c.opts.Elicit != nil {
		h.elicit = func(ctx context.Context, e Elicitation) (ElicitationResult, error) {
			s.c.emit(Event{Server: s.cfg.Name, Kind: EventElicit, Text: e.Message})
			return s.c.opts.Elicit(ctx, e)
		}
	}
	if s.cfg.URL != "" {
		var headers map[string]string
		if headers, err = s.headers(); err == nil {
			cn, err = dialHTTP(ctx, s.c.life, &s.cfg, s.httpClient(), headers, h)
		}
	} else {
		proc, cn, err = s.startStdio(ctx, gen, h)
	}
	if err == nil {
		var list []remoteTool
		if list, err = cn.listTools(ctx); err == nil {
			s.setTools(list)
		} else {
			err = fmt.Errorf("list its tools: %w", err)
			cn.close()
		}
	}
	if err != nil {
		if proc != nil {
			proc.Kill()
			s.waitExit(gen)
		}
		kind := ErrStart
		if errors.Is(err, netfloor.ErrFloor) || errors.Is(err, netfloor.ErrSpelling) {
			kind = ErrRefused
		}
		if ctx.Err() != nil && !errors.Is(err, context.Canceled) {
			err = fmt.Errorf("no answer within the start timeout of %s: %w", s.cfg.startTimeout(), err)
		}
		s.c.emit(Event{Server: s.cfg.Name, Kind: EventConnect, Transport: s.cfg.Transport(), Outcome: "failed",
			Text: err.Error(), LatencyMS: time.Since(started).Milliseconds()})
		return &Error{Server: s.cfg.Name, Kind: kind, Message: "could not connect", Err: err, Stderr: s.stderr.String()}
	}
	s.mu.Lock()
	s.conn, s.down, s.protocol = cn, "", cn.protocol()
	backend := s.backend
	var enf *sandbox.Enforcement
	if proc != nil {
		e := proc.Enforcement
		enf = &e
	}
	names := make([]string, len(s.tools))
	for i, t := range s.tools {
		names[i] = t.name
	}
	notes := s.notes
	s.mu.Unlock()
	s.c.emit(Event{Server: s.cfg.Name, Kind: EventConnect, Transport: s.cfg.Transport(), Protocol: cn.protocol(),
		Backend: backend, Host: s.cfg.Host, Enforcement: enf, Outcome: "ok", LatencyMS: time.Since(started).Milliseconds()})
	s.c.emit(Event{Server: s.cfg.Name, Kind: EventTools, Tools: names, Text: strings.Join(notes, "; ")})
	return nil
}

// startStdio launches the server and starts a session over its streams.
func (s *session) startStdio(ctx context.Context, gen int, h hooks) (*Process, conn, error) {
	env := []string{"PATH=" + s.path()}
	for k, v := range s.cfg.Env {
		val, err := expand(v, s.c.opts.Getenv)
		if err != nil {
			return nil, nil, fmt.Errorf("env %s: %w", k, err)
		}
		env = append(env, k+"="+val)
	}
	l := s.c.opts.Launcher
	if s.cfg.Host {
		l = HostLauncher{}
	}
	proc, err := l.Launch(ctx, Command{Server: s.cfg.Name, Argv: s.cfg.Command, Env: env, Dir: s.cfg.Cwd})
	if err != nil {
		return nil, nil, fmt.Errorf("start %s: %w", s.cfg.Command[0], err)
	}
	exited := make(chan struct{})
	s.mu.Lock()
	s.proc, s.exited, s.exitErr, s.backend = proc, exited, nil, proc.Backend
	s.mu.Unlock()

	p := newPending()
	fr := &framer{max: s.cfg.maxOutput(), pending: p, onFault: func(f fault) {
		s.c.emit(Event{Server: s.cfg.Name, Kind: EventFault, Outcome: f.Kind, Text: f.Detail})
	}}
	pr, pw := io.Pipe()
	var streams sync.WaitGroup
	streams.Add(2)
	s.c.wg.Add(3)
	go func() {
		defer s.c.wg.Done()
		defer streams.Done()
		fr.run(proc.Stdout, pw)
	}()
	go func() {
		defer s.c.wg.Done()
		defer streams.Done()
		s.drainStderr(proc.Stderr)
	}()
	go func() {
		defer s.c.wg.Done()
		err := proc.Wait()
		streams.Wait()
		proc.Stdout.Close()
		proc.Stderr.Close()
		s.mu.Lock()
		current := s.gen == gen
		s.exitErr = err
		if current && s.down == "" {
			s.down = "the server exited"
		}
		s.mu.Unlock()
		close(exited)
		if current {
			s.changed.Store(true)
		}
		text := "exited"
		if err != nil {
			text = "exited: " + err.Error()
		}
		s.c.emit(Event{Server: s.cfg.Name, Kind: EventExit, Text: text})
	}()
	w := &tap{w: proc.Stdin, pending: p, timeout: s.cfg.callTimeout()}
	cn, err := dialIO(ctx, s.c.life, &s.cfg, pr, w, h)
	if err != nil {
		return proc, nil, err
	}
	return proc, cn, nil
}

func (s *session) path() string {
	if s.c.opts.Path != "" {
		return s.c.opts.Path
	}
	return "/usr/local/bin:/usr/bin:/bin"
}

// drainStderr keeps the server's stderr flowing: its tail for errors,
// and its lines, bounded, for the trace.
func (s *session) drainStderr(r io.Reader) {
	buf := make([]byte, 4096)
	var line []byte
	flush := func() {
		if len(line) == 0 {
			return
		}
		s.mu.Lock()
		ok := s.traced < stderrTraced
		s.traced += len(line)
		over := ok && s.traced >= stderrTraced
		s.mu.Unlock()
		if ok {
			text := strings.ToValidUTF8(string(line[:min(len(line), stderrLine)]), "\uFFFD")
			if len(line) > stderrLine {
				text += fmt.Sprintf(" [%d bytes more]", len(line)-stderrLine)
			}
			s.c.emit(Event{Server: s.cfg.Name, Kind: EventStderr, Text: text})
			if over {
				s.c.emit(Event{Server: s.cfg.Name, Kind: EventStderr, Text: fmt.Sprintf("[stderr: %d bytes traced; the rest is not]", stderrTraced)})
			}
		}
		line = line[:0]
	}
	for {
		n, err := r.Read(buf)
		s.stderr.Write(buf[:n])
		for _, b := range buf[:n] {
			if b == '\n' {
				flush()
				continue
			}
			if len(line) <= stderrLine {
				line = append(line, b)
			} else {
				line = append(line[:stderrLine], 0)[:stderrLine+1]
			}
		}
		if err != nil {
			flush()
			return
		}
	}
}

// headers expands the configured headers' ${NAME}s.
func (s *session) headers() (map[string]string, error) {
	out := make(map[string]string, len(s.cfg.Headers))
	for k, v := range s.cfg.Headers {
		val, err := expand(v, s.c.opts.Getenv)
		if err != nil {
			return nil, fmt.Errorf("header %s: %w", k, err)
		}
		out[k] = val
	}
	return out, nil
}

// httpClient is the client of an HTTP server: every dial through the
// policy and the address floor, every body bounded by the output cap.
func (s *session) httpClient() *http.Client {
	tr := &http.Transport{
		Proxy:                  nil,
		DialContext:            s.dial,
		MaxResponseHeaderBytes: 64 << 10,
		TLSHandshakeTimeout:    s.cfg.startTimeout(),
		ResponseHeaderTimeout:  s.cfg.callTimeout(),
		ForceAttemptHTTP2:      true,
	}
	return &http.Client{
		Transport: &capped{base: tr, max: int64(s.cfg.maxOutput())},
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) >= 5 {
				return errors.New("more than 5 redirects")
			}
			return nil
		},
	}
}

// dial connects to addr through the policy and the address floor: the
// configured host:port was judged at Connect; any other (a redirect) must
// be allowed by the policy without asking.
func (s *session) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	target := net.JoinHostPort(host, port)
	named := s.named
	if target != s.hostPort {
		named = ""
		if g := s.c.opts.Gate; g != nil {
			v := g.Peek(policy.Net, target)
			s.c.emit(Event{Server: s.cfg.Name, Kind: EventVerdict, Verdict: &v, Outcome: string(v.Effect)})
			if v.Effect != policy.Allow {
				return nil, &Error{Server: s.cfg.Name, Kind: ErrRefused, Message: "the policy does not allow " + v.String()}
			}
			if v.Rule == target || v.Rule == host {
				named = host
			}
		}
	}
	a, err := netfloor.Resolve(ctx, s.c.opts.Resolver, host, named)
	if err != nil {
		return nil, err
	}
	var d net.Dialer
	return d.DialContext(ctx, network, net.JoinHostPort(a.String(), port))
}

// setTools maps a fresh list and installs it.
func (s *session) setTools(list []remoteTool) {
	names := make([]string, len(list))
	byName := make(map[string]remoteTool, len(list))
	for i, t := range list {
		names[i] = t.Name
		if _, ok := byName[t.Name]; !ok {
			byName[t.Name] = t
		}
	}
	maps, notes := mapNames(s.cfg.Name, names)
	tools := make([]*Tool, 0, len(maps))
	for _, m := range maps {
		tools = append(tools, newTool(s, m, byName[m.Remote]))
	}
	s.mu.Lock()
	s.tools, s.notes = tools, notes
	s.mu.Unlock()
}

func (s *session) current() []*Tool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*Tool(nil), s.tools...)
}

// refresh lists the tools again; it reports whether the list changed.
func (s *session) refresh(ctx context.Context) bool {
	cn, err := s.ensure(ctx)
	if err != nil {
		s.c.emit(Event{Server: s.cfg.Name, Kind: EventTools, Outcome: "failed", Text: err.Error()})
		return false
	}
	before := specsOf(s.current())
	lctx, cancel := context.WithTimeout(ctx, s.cfg.callTimeout())
	list, err := cn.listTools(lctx)
	cancel()
	if err != nil {
		s.c.emit(Event{Server: s.cfg.Name, Kind: EventTools, Outcome: "failed", Text: err.Error()})
		return false
	}
	s.setTools(list)
	cur := s.current()
	after := specsOf(cur)
	if before == after {
		return false
	}
	names := make([]string, len(cur))
	for i, t := range cur {
		names[i] = t.name
	}
	s.mu.Lock()
	notes := strings.Join(s.notes, "; ")
	s.mu.Unlock()
	s.c.emit(Event{Server: s.cfg.Name, Kind: EventTools, Tools: names, Text: notes, Outcome: "changed"})
	return true
}

func specsOf(ts []*Tool) string {
	var b strings.Builder
	for _, t := range ts {
		fmt.Fprintf(&b, "%s\x00%s\x00%s\x00%v\x00", t.name, t.remote.Description, t.remote.InputSchema, t.Idempotent())
	}
	return b.String()
}

// ensure returns the live connection, restarting a server that died
// after its backoff. A server given up stays so.
func (s *session) ensure(ctx context.Context) (conn, error) {
	s.mu.Lock()
	cn, gone := s.conn, s.gone
	s.mu.Unlock()
	if cn != nil {
		return cn, nil
	}
	if gone != nil {
		return nil, gone
	}
	s.startMu.Lock()
	defer s.startMu.Unlock()
	for {
		s.mu.Lock()
		cn, gone, wait, n := s.conn, s.gone, time.Until(s.nextStart), s.failures
		s.mu.Unlock()
		switch {
		case cn != nil:
			return cn, nil
		case gone != nil:
			return nil, gone
		case s.c.closed.Load():
			return nil, &Error{Server: s.cfg.Name, Kind: ErrClosed, Message: "the client is closed"}
		}
		if wait > 0 {
			s.c.emit(Event{Server: s.cfg.Name, Kind: EventRestart, Attempt: n, WaitMS: wait.Milliseconds()})
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return nil, ctx.Err()
			case <-t.C:
			}
		}
		err := s.start(ctx)
		if err == nil {
			s.changed.Store(true)
			s.mu.Lock()
			cn = s.conn
			s.mu.Unlock()
			return cn, nil
		}
		if ctx.Err() != nil {
			return nil, err
		}
		s.failed(err.Error())
	}
}

// lost records that the connection is gone and schedules the restart;
// gen is the connection's generation, so that a late report of an old
// one changes nothing.
func (s *session) lost(gen int, why string) {
	s.mu.Lock()
	if s.gen != gen || s.conn == nil {
		s.mu.Unlock()
		return
	}
	cn := s.conn
	s.conn = nil
	s.mu.Unlock()
	cn.close()
	s.failed(why)
}

// failed counts a crash or failed start and schedules the next start,
// or gives the server up.
func (s *session) failed(why string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failures++
	s.down = why
	max := s.c.opts.Restart.attempts()
	if s.failures > max {
		s.gone = &Error{Server: s.cfg.Name, Kind: ErrStart,
			Message: fmt.Sprintf("given up after %d restarts in a row; the last: %s", max, why), Stderr: s.stderr.String()}
		return
	}
	s.nextStart = time.Now().Add(s.c.opts.Restart.wait(s.failures))
}

// waitExit waits, a bounded time, for process gen to be gone and returns
// how it ended.
func (s *session) waitExit(gen int) (error, bool) {
	s.mu.Lock()
	ch, g := s.exited, s.gen
	s.mu.Unlock()
	if ch == nil || g != gen {
		return nil, false
	}
	select {
	case <-ch:
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.exitErr, true
	case <-time.After(exitGrace):
		return nil, false
	}
}

// stop ends the connection and the process, for good.
func (s *session) stop() {
	s.mu.Lock()
	cn, proc, gen := s.conn, s.proc, s.gen
	s.conn = nil
	if s.gone == nil {
		s.gone = &Error{Server: s.cfg.Name, Kind: ErrClosed, Message: "the client is closed"}
	}
	s.mu.Unlock()
	if cn != nil {
		cn.close()
	}
	if proc != nil {
		proc.Kill()
		s.waitExit(gen)
	}
}
