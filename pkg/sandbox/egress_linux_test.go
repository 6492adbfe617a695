package sandbox

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// echoServer echoes lines on a host loopback port until the test ends.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				line, _ := bufio.NewReader(c).ReadString('\n')
				fmt.Fprint(c, line)
			}()
		}
	}()
	return ln.Addr().String()
}

// TestEgressProxy runs commands with an allow-list on the backends that
// serve it, and checks each decision the proxy made.
func TestEgressProxy(t *testing.T) {
	web := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello %s", r.URL.Path)
	}))
	defer web.Close()
	webAddr := strings.TrimPrefix(web.URL, "http://")
	_, webPort, _ := net.SplitHostPort(webAddr)
	echo := echoServer(t)
	port, _ := strconv.Atoi(webPort)
	// The same port on another loopback address, which only the proxy's
	// exact match keeps out.
	tcpListener(t, "127.0.0.2:"+webPort)
	served := 0
	for _, n := range linuxSandboxes(t, false) {
		if n.sb.Enforcement().Network == NetworkOpen {
			continue
		}
		t.Run(n.label, func(t *testing.T) {
			allow := Network{Allow: []string{webAddr, echo, "localhost:" + webPort}}
			res := attempt(t, n.sb, Spec{Network: allow}, "http", web.URL+"/x")
			if res.Enforced.Network != NetworkAllowList {
				if res.Enforced.Network != NetworkDenied || res.ExitCode == escaped {
					t.Fatalf("network %q, exit %d: a backend that cannot serve the allow-list must deny everything", res.Enforced.Network, res.ExitCode)
				}
				t.Logf("%s does not serve an allow-list; everything is denied: %s", n.label, res.Stdout)
				return
			}
			served++
			type check struct {
				op, arg string
				want    int
				stdout  string
				egress  []Connection
			}
			checks := []check{
				{"http", web.URL + "/x", escaped, "200 hello /x", []Connection{{Host: "127.0.0.1", Port: port, Allowed: true, Reason: `allowed by "` + webAddr + `"`}}},
				{"http", "http://127.0.0.2:" + webPort + "/", contained, "403 io-harness egress proxy: 127.0.0.2:" + webPort + " refused: not in the allow-list\n",
					[]Connection{{Host: "127.0.0.2", Port: port, Reason: "not in the allow-list"}}},
				{"http", "http://localhost:" + webPort + "/", contained, "403 io-harness egress proxy: localhost:" + webPort + " refused: resolves to 127.0.0.1, a loopback address (127.0.0.0/8), which the allow-list does not name\n",
					[]Connection{{Host: "localhost", Port: port, Reason: "resolves to 127.0.0.1, a loopback address (127.0.0.0/8), which the allow-list does not name"}}},
				{"connect", echo, escaped, `tunnel: "ping\n" <nil>`, []Connection{{Host: "127.0.0.1", Port: mustPort(t, echo), Allowed: true, Reason: `allowed by "` + echo + `"`}}},
				{"tcp", webAddr, contained, "", nil}, // a direct dial, past the proxy
			}
			for _, c := range checks {
				res := attempt(t, n.sb, Spec{Network: allow}, c.op, c.arg)
				if res.ExitCode != c.want {
					t.Errorf("%s %s: exit %d, want %d: %s %s", c.op, c.arg, res.ExitCode, c.want, res.Stdout, res.Stderr)
				}
				if c.stdout != "" && string(res.Stdout) != c.stdout {
					t.Errorf("%s %s: stdout %q, want %q", c.op, c.arg, res.Stdout, c.stdout)
				}
				if diff := cmp.Diff(c.egress, res.Egress); diff != "" {
					t.Errorf("%s %s: egress decisions (-want +got):\n%s", c.op, c.arg, diff)
				}
			}
		})
	}
	if served == 0 {
		t.Skip("no backend here serves an egress allow-list")
	}
}

func mustPort(t *testing.T, addr string) int {
	t.Helper()
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	n, _ := strconv.Atoi(p)
	return n
}
