package sandbox

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
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
// decides by the name the command asked for, resolves it itself, dials
// the address it resolved (so that a later answer cannot change it), and
// refuses loopback, private and link-local addresses unless the
// allow-list names that very address.
type egress struct {
	ln     net.Listener
	allow  []hostPort
	dialer net.Dialer
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu    sync.Mutex // guards the fields below
	conns map[net.Conn]struct{}
	log   []Connection
}

// serveEgress starts serving ln until close.
func serveEgress(ln net.Listener, allow []hostPort) *egress {
	ctx, cancel := context.WithCancel(context.Background())
	e := &egress{ln: ln, allow: allow, ctx: ctx, cancel: cancel, conns: map[net.Conn]struct{}{}}
	e.dialer.Timeout = 10 * time.Second
	e.wg.Add(1)
	go e.accept()
	return e
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
	n, _ := strconv.Atoi(port)
	up, decision := e.dial(strings.ToLower(host), n)
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

// dial checks host:port against the allow-list and connects to it.
func (e *egress) dial(host string, port int) (net.Conn, Connection) {
	d := Connection{Host: host, Port: port}
	entry, ok := e.match(host, port)
	if !ok {
		d.Reason = "not in the allow-list"
		return nil, d
	}
	ips, err := net.DefaultResolver.LookupIPAddr(e.ctx, host)
	if err != nil || len(ips) == 0 {
		d.Reason = fmt.Sprintf("cannot resolve: %v", err)
		return nil, d
	}
	ip := ips[0].IP
	literal := net.ParseIP(entry.host)
	if (ip.IsLoopback() || ip.IsPrivate() || ip.IsLinkLocalUnicast() || ip.IsUnspecified()) && !ip.Equal(literal) {
		d.Reason = fmt.Sprintf("resolves to the local address %s, which the allow-list does not name", ip)
		return nil, d
	}
	c, err := e.dialer.DialContext(e.ctx, "tcp", net.JoinHostPort(ip.String(), strconv.Itoa(port)))
	if err != nil {
		d.Reason = fmt.Sprintf("dial: %v", err)
		return nil, d
	}
	d.Allowed, d.Reason = true, fmt.Sprintf("allowed by %q", entry.String())
	return c, d
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
