package sandbox

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/initorigin/io-harness-go/pkg/sandbox/netfloor"
)

// Connection is one decision of a run's egress proxy.
type Connection struct {
	// Host and Port are what the command asked for.
	Host string `json:"host"`
	Port int    `json:"port"`
	// Allowed says whether the proxy connected it.
	Allowed bool `json:"allowed"`
	// Reason says why, in plain words.
	Reason string `json:"reason"`
}

// proxyEnv returns env announcing the proxy at 127.0.0.1:port to every
// client that honours the usual variables.
func proxyEnv(env []string, port int) []string {
	env = envWithout(env, proxyVars()...)
	url := "http://127.0.0.1:" + strconv.Itoa(port)
	for _, k := range []string{"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy",
		"npm_config_proxy", "npm_config_https_proxy", "PIP_PROXY"} {
		env = append(env, k+"="+url)
	}
	return append(env, "NO_PROXY=", "no_proxy=")
}

// egress is a run's egress proxy: HTTP CONNECT for any TCP protocol and
// absolute-form requests for plain HTTP, one request per connection. It
// canonicalises the host the command asked for (refusing spellings that
// parsers read differently), decides by it against the allow-list, and
// leaves the rest to the address floor (netfloor.Resolve): it resolves
// the name itself, refuses it when an address is on the floor (loopback,
// private, carrier-grade NAT, link-local, cloud metadata, …) unless the
// allow-list names that very address, and dials the address it resolved
// (so that a later answer cannot change it).
type egress struct {
	ln       net.Listener
	allow    []hostPort // hosts canonical; entries that cannot be are left out
	dialer   net.Dialer
	resolver netfloor.Resolver
	// dialTCP connects to the address the floor decided on: the dialer's
	// DialContext, or a test's.
	dialTCP func(ctx context.Context, network, addr string) (net.Conn, error)
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup

	mu    sync.Mutex // guards the fields below
	conns map[net.Conn]struct{}
	log   []Connection
}

// serveEgress starts serving ln until close.
func serveEgress(ln net.Listener, allow []hostPort) *egress {
	e := newEgress(ln, allow)
	e.start()
	return e
}

// newEgress returns a proxy for ln that resolves with the system's
// resolver; start serves it.
func newEgress(ln net.Listener, allow []hostPort) *egress {
	ctx, cancel := context.WithCancel(context.Background())
	e := &egress{ln: ln, ctx: ctx, cancel: cancel, conns: map[net.Conn]struct{}{}, resolver: net.DefaultResolver}
	e.dialer.Timeout = 10 * time.Second
	e.dialTCP = e.dialer.DialContext
	for _, a := range allow {
		host, wild := strings.CutPrefix(a.host, "*.")
		canon, err := netfloor.Canonical(host)
		if err != nil {
			continue // a spelling the proxy refuses can match nothing
		}
		if wild {
			canon = "*." + canon
		}
		e.allow = append(e.allow, hostPort{host: canon, port: a.port})
	}
	return e
}

// start serves the proxy until close.
func (e *egress) start() {
	e.wg.Add(1)
	go e.accept()
}

// close stops the proxy, cuts every connection, waits for its goroutines
// and returns its decisions.
func (e *egress) close() []Connection {
	e.cancel()
	e.ln.Close()
	e.mu.Lock()
	for c := range e.conns {
		c.Close()
	}
	e.mu.Unlock()
	e.wg.Wait()
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.log
}

func (e *egress) track(c net.Conn) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.ctx.Err() != nil {
		c.Close()
		return false
	}
	e.conns[c] = struct{}{}
	return true
}

func (e *egress) untrack(c net.Conn) {
	e.mu.Lock()
	delete(e.conns, c)
	e.mu.Unlock()
	c.Close()
}

func (e *egress) record(c Connection) {
	e.mu.Lock()
	e.log = append(e.log, c)
	e.mu.Unlock()
}

func (e *egress) accept() {
	defer e.wg.Done()
	for {
		c, err := e.ln.Accept()
		if err != nil {
			return
		}
		if !e.track(c) {
			continue
		}
		e.wg.Add(1)
		go func() {
			defer e.wg.Done()
			defer e.untrack(c)
			e.serve(c)
		}()
	}
}

// serve handles one client connection.
func (e *egress) serve(c net.Conn) {
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	br := bufio.NewReader(c)
	req, err := http.ReadRequest(br)
	if err != nil {
		return
	}
	c.SetReadDeadline(time.Time{})
	host, port := req.URL.Hostname(), req.URL.Port()
	if req.Method == http.MethodConnect {
		host, port, _ = net.SplitHostPort(req.Host)
	} else if req.URL.Scheme != "http" || host == "" {
		io.WriteString(c, "HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\nio-harness egress proxy: want CONNECT or an absolute http:// URL\n")
		return
	}
	if port == "" {
		port = "80"
	}
	up, decision := e.dial(strings.ToLower(host), port)
	e.record(decision)
	if up == nil {
		fmt.Fprintf(c, "HTTP/1.1 403 Forbidden\r\nConnection: close\r\nContent-Type: text/plain\r\n\r\nio-harness egress proxy: %s:%d refused: %s\n",
			decision.Host, decision.Port, decision.Reason)
		return
	}
	if !e.track(up) {
		return
	}
	defer e.untrack(up)
	if req.Method == http.MethodConnect {
		if _, err := io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
			return
		}
		if n := br.Buffered(); n > 0 {
			b, _ := br.Peek(n)
			if _, err := up.Write(b); err != nil {
				return
			}
		}
	} else {
		req.RequestURI = ""
		req.Close = true
		req.Header.Del("Proxy-Connection")
		req.Header.Del("Proxy-Authorization")
		if err := req.Write(up); err != nil {
			return
		}
	}
	done := make(chan struct{}, 2)
	go func() {
		io.Copy(up, br)
		if tc, ok := up.(*net.TCPConn); ok {
			tc.CloseWrite()
		}
		done <- struct{}{}
	}()
	io.Copy(c, up)
	c.Close()
	up.Close()
	<-done
}

// dial checks host:port against the allow-list and the address floor,
// and connects to the address the floor decided on.
func (e *egress) dial(host, portText string) (net.Conn, Connection) {
	port, err := strconv.Atoi(portText)
	if err != nil || port < 1 || port > 65535 || portText[0] < '0' || portText[0] > '9' {
		port = 0
	}
	d := Connection{Host: host, Port: port}
	if port == 0 {
		d.Reason = fmt.Sprintf("port %q is not a number from 1 to 65535", portText)
		return nil, d
	}
	canon, err := netfloor.Canonical(host)
	if err != nil {
		d.Reason = "the host " + floorWhy(err)
		return nil, d
	}
	entry, ok := e.match(canon, port)
	if !ok {
		d.Reason = "not in the allow-list"
		return nil, d
	}
	named := entry.host // the lift: what the allow-list names literally
	if strings.HasPrefix(named, "*.") {
		named = ""
	}
	addr, err := netfloor.Resolve(e.ctx, e.resolver, canon, named)
	if errors.Is(err, netfloor.ErrFloor) {
		d.Reason = floorWhy(err) + ", which the allow-list does not name"
		return nil, d
	}
	if err != nil {
		d.Reason = fmt.Sprintf("cannot resolve: %v", err)
		return nil, d
	}
	c, err := e.dialTCP(e.ctx, "tcp", netip.AddrPortFrom(addr, uint16(port)).String())
	if err != nil {
		d.Reason = fmt.Sprintf("dial: %v", err)
		return nil, d
	}
	d.Allowed, d.Reason = true, fmt.Sprintf("allowed by %q", entry.String())
	return c, d
}

// floorWhy returns what a netfloor refusal says about the host.
func floorWhy(err error) string {
	var fe *netfloor.Error
	if errors.As(err, &fe) {
		return fe.Why
	}
	return err.Error()
}

// match finds the allow-list entry for host:port: the same host (or, for
// "*.example.com", a subdomain of it) and the same port, or any port when
// the entry has none.
func (e *egress) match(host string, port int) (hostPort, bool) {
	for _, a := range e.allow {
		if a.port != 0 && a.port != port {
			continue
		}
		if a.host == host {
			return a, true
		}
		if suffix, ok := strings.CutPrefix(a.host, "*."); ok && strings.HasSuffix(host, "."+suffix) {
			return a, true
		}
	}
	return hostPort{}, false
}

func (h hostPort) String() string {
	if h.port == 0 {
		return h.host
	}
	return net.JoinHostPort(h.host, strconv.Itoa(h.port))
}
