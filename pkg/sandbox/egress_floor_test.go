package sandbox

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"
)

// floorLab is an egress proxy on a host port whose DNS answers come from
// a table and whose connections all reach one local upstream, with the
// address the proxy chose to dial written down: nothing can listen on
// 169.254.169.254 or 100.64.0.1 on a shared machine, and the decision,
// not the last hop, is under test.
type floorLab struct {
	proxy    string // host:port of the proxy
	upstream string // host:port of the line echo everything reaches

	mu      sync.Mutex // guards the fields below
	answers map[string][]string
	lookups map[string]int
	dialed  []string
}

func (l *floorLab) LookupNetIP(_ context.Context, _, host string) ([]netip.Addr, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lookups[host]++
	answers := l.answers[host]
	if host == "rebinding.test" && l.lookups[host] > 1 {
		answers = []string{"127.0.0.1"}
	}
	if len(answers) == 0 {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	var out []netip.Addr
	for _, a := range answers {
		out = append(out, netip.MustParseAddr(a))
	}
	return out, nil
}

func (l *floorLab) take() (dialed []string, lookups int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, n := range l.lookups {
		lookups += n
	}
	dialed = l.dialed
	l.dialed, l.lookups = nil, map[string]int{}
	return dialed, lookups
}

// newFloorLab serves a proxy with allow until the test ends.
func newFloorLab(t *testing.T, allow ...string) *floorLab {
	t.Helper()
	up, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { up.Close() })
	go func() {
		for {
			c, err := up.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				c.SetDeadline(time.Now().Add(10 * time.Second))
				line, _ := bufio.NewReader(c).ReadString('\n')
				if strings.HasPrefix(line, "GET ") { // a request the proxy forwarded
					fmt.Fprint(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
					return
				}
				fmt.Fprint(c, line)
			}()
		}
	}()
	l := &floorLab{upstream: up.Addr().String(), lookups: map[string]int{}, answers: map[string][]string{
		"public.test":          {"93.184.215.14"},
		"split.test":           {"93.184.215.14", "10.0.0.7"},
		"rebinding.test":       {"93.184.215.14"},
		"metadata.goog":        {"8.8.4.4"},
		"metadata.google.test": {"169.254.169.254"},
	}}
	var hps []hostPort
	for _, a := range allow {
		hp, err := parseHostPort(a)
		if err != nil {
			t.Fatal(err)
		}
		hps = append(hps, hp)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e := newEgress(ln, hps)
	e.resolver = l
	e.dialTCP = func(ctx context.Context, network, addr string) (net.Conn, error) {
		l.mu.Lock()
		l.dialed = append(l.dialed, addr)
		l.mu.Unlock()
		var d net.Dialer
		return d.DialContext(ctx, network, l.upstream)
	}
	e.start()
	t.Cleanup(func() { e.close() })
	l.proxy = ln.Addr().String()
	return l
}

// request sends one raw request line through the proxy and reports
// whether a tunnel (CONNECT) or request (absolute form) got through to
// the upstream, and the proxy's refusal otherwise.
func (l *floorLab) request(t *testing.T, line string) (through bool, refusal string) {
	t.Helper()
	c, err := net.DialTimeout("tcp", l.proxy, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	fmt.Fprintf(c, "%s\r\nHost: x\r\n\r\n", line)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return false, "no response: " + err.Error()
	}
	if resp.StatusCode != http.StatusOK {
		var b strings.Builder
		br.WriteTo(&b)
		return false, strings.TrimSpace(b.String())
	}
	if strings.HasPrefix(line, "GET ") {
		var b strings.Builder
		br.WriteTo(&b)
		return b.String() == "ok", ""
	}
	fmt.Fprint(c, "ping\n")
	echo, _ := br.ReadString('\n')
	return echo == "ping\n", ""
}

// TestEgressFloor asks the proxy for each address and name on the floor
// through an allow-list entry that names a host which resolves there:
// each is refused, and nothing is dialled. The negative control of each
// names that very address in the allow-list and gets through, to the
// address asked for.
func TestEgressFloor(t *testing.T) {
	const port = "8443"
	floor := []struct {
		addr string // as a CONNECT target writes it
		why  string
	}{
		{"100.64.0.1", "a carrier-grade NAT address (100.64.0.0/10)"},
		{"100.127.255.254", "a carrier-grade NAT address (100.64.0.0/10)"},
		{"100.100.100.200", "a cloud metadata service (Alibaba Cloud)"},
		{"169.254.169.254", "a cloud metadata service (AWS, GCP, Azure, OpenStack and others)"},
		{"169.254.170.2", "a cloud metadata service (AWS ECS task credentials)"},
		{"192.0.0.192", "a cloud metadata service (Oracle Cloud)"},
		{"168.63.129.16", "a cloud platform service (Azure wire server)"},
		{"0.0.0.0", `a "this network" address (0.0.0.0/8)`},
		{"0.1.2.3", `a "this network" address (0.0.0.0/8)`},
		{"192.0.0.8", "an IETF protocol assignment (192.0.0.0/24)"},
		{"198.18.0.1", "a benchmarking address (198.18.0.0/15)"},
		{"198.51.100.1", "a documentation address (198.51.100.0/24)"},
		{"240.0.0.1", "a reserved address (240.0.0.0/4)"},
		{"224.0.0.251", "a multicast address (224.0.0.0/4)"},
		{"255.255.255.255", "a broadcast address (255.255.255.255)"},
		{"10.1.2.3", "a private address (10.0.0.0/8)"},
		{"127.0.0.2", "a loopback address (127.0.0.0/8)"},
		{"[::]", "an unspecified address (::)"},
		{"[::1]", "a loopback address (::1)"},
		{"[fd00:ec2::254]", "a cloud metadata service (AWS, IPv6)"},
		{"[fc00::1]", "a unique-local address (fc00::/7)"},
		{"[fe80::1]", "a link-local address (fe80::/10)"},
		{"[ff02::1]", "a multicast address (ff00::/8)"},
		{"[64:ff9b::a9fe:a9fe]", "a NAT64 address (64:ff9b::/96) of 169.254.169.254, a cloud metadata service (AWS, GCP, Azure, OpenStack and others)"},
		{"[64:ff9b::a00:1]", "a NAT64 address (64:ff9b::/96) of 10.0.0.1, a private address (10.0.0.0/8)"},
		{"[2002:c0a8:101::1]", "a 6to4 address (2002::/16) of 192.168.1.1, a private address (192.168.0.0/16)"},
		{"[2001:0:4136:e378:8000:63bf:3fff:fdd2]", "a Teredo address (2001::/32)"},
		{"[::7f00:1]", "an IPv4-compatible address (::/96, deprecated)"},
	}
	for _, f := range floor {
		t.Run(f.addr, func(t *testing.T) {
			bare := strings.Trim(f.addr, "[]")
			canon := netip.MustParseAddr(bare).Unmap().String()
			// The attack: a name the allow-list names resolves to the
			// floor address.
			l := newFloorLab(t, "rebound.test:"+port)
			l.answers["rebound.test"] = []string{bare}
			through, refusal := l.request(t, "CONNECT rebound.test:"+port+" HTTP/1.1")
			dialed, _ := l.take()
			want := "rebound.test:" + port + " refused: resolves to " + canon + ", " + f.why + ", which the allow-list does not name"
			if through || !strings.Contains(refusal, want) || len(dialed) != 0 {
				t.Errorf("through %v, refusal %q, dialled %q; want refused with %q and nothing dialled", through, refusal, dialed, want)
			}
			// The control: the allow-list names that very address.
			l = newFloorLab(t, f.addr+":"+port)
			through, refusal = l.request(t, "CONNECT "+f.addr+":"+port+" HTTP/1.1")
			dialed, lookups := l.take()
			wantDial := net.JoinHostPort(canon, port)
			if !through || len(dialed) != 1 || dialed[0] != wantDial || lookups != 0 {
				t.Errorf("named: through %v (%q), dialled %q, %d lookups; want through to %s without a lookup", through, refusal, dialed, lookups, wantDial)
			}
		})
	}
}

// TestEgressFloorNames covers what the floor decides by name and by the
// whole of a name's answers, each with its control.
func TestEgressFloorNames(t *testing.T) {
	const port = "443"
	tests := []struct {
		name    string
		allow   []string
		line    string
		through bool
		why     string // a substring of the refusal
		dialed  string // the address dialled, when through
		lookups int
	}{
		{"a metadata name by a wildcard", []string{"*.google.internal"}, "CONNECT metadata.google.internal:443 HTTP/1.1", false,
			"metadata.google.internal:443 refused: is the name of a cloud metadata service, which the allow-list does not name", "", 0},
		{"a metadata name with a trailing dot", []string{"*.goog"}, "CONNECT METADATA.goog.:443 HTTP/1.1", false,
			"is the name of a cloud metadata service", "", 0},
		{"control: a metadata name named, answering a public address", []string{"metadata.goog:443"}, "CONNECT metadata.goog:443 HTTP/1.1", true,
			"", "8.8.4.4:443", 1},
		{"a name named, answering the metadata address", []string{"metadata.google.test:443"}, "CONNECT metadata.google.test:443 HTTP/1.1", false,
			"resolves to 169.254.169.254, a cloud metadata service", "", 1},
		{"one private answer among public ones", []string{"split.test:443"}, "CONNECT split.test:443 HTTP/1.1", false,
			"resolves to 10.0.0.7, a private address (10.0.0.0/8)", "", 1},
		{"control: a public name", []string{"public.test:443"}, "CONNECT public.test:443 HTTP/1.1", true, "", "93.184.215.14:443", 1},
		{"control: a public name by a wildcard", []string{"*.test"}, "CONNECT public.test:443 HTTP/1.1", true, "", "93.184.215.14:443", 1},
		// The proxy resolves once and dials what it resolved: the
		// second, rebound answer is never used.
		{"a name that rebinds after the first answer", []string{"rebinding.test:443"}, "CONNECT rebinding.test:443 HTTP/1.1", true,
			"", "93.184.215.14:443", 1},
		{"a signed port, which the request parser refuses", []string{"public.test"}, "CONNECT public.test:+443 HTTP/1.1", false, "no response", "", 0},
		{"port 0", []string{"public.test"}, "CONNECT public.test:0 HTTP/1.1", false, `port "0" is not a number from 1 to 65535`, "", 0},
		{"a port out of range", []string{"public.test"}, "CONNECT public.test:65979 HTTP/1.1", false, `port "65979" is not a number from 1 to 65535`, "", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := newFloorLab(t, tt.allow...)
			through, refusal := l.request(t, tt.line)
			dialed, lookups := l.take()
			if through != tt.through || !strings.Contains(refusal, tt.why) || lookups != tt.lookups {
				t.Fatalf("through %v, refusal %q, %d lookups; want through %v, refusal with %q, %d lookups", through, refusal, lookups, tt.through, tt.why, tt.lookups)
			}
			if tt.through && (len(dialed) != 1 || dialed[0] != tt.dialed) || !tt.through && len(dialed) != 0 {
				t.Errorf("dialled %q, want %q", dialed, tt.dialed)
			}
		})
	}
}

// TestEgressSpellings asks for the allowed loopback upstream in the
// spellings that parsers read differently: the proxy refuses each,
// before any lookup, even though the allow-list names the address it
// would be under the C library's reading. Spellings that mean the named
// address to every parser are the control, and get through to it.
func TestEgressSpellings(t *testing.T) {
	l := newFloorLab(t)
	_, port, _ := net.SplitHostPort(l.upstream)
	l = newFloorLab(t, "127.0.0.1:"+port, "[::ffff:127.0.0.2]:"+port)
	const ambiguous = "refused: the host ends in a number but is not four decimal numbers"
	tests := []struct {
		line    string
		through bool
		why     string
	}{
		{"CONNECT 127.0.0.1:%s HTTP/1.1", true, ""},
		{"CONNECT 127.0.0.1.:%s HTTP/1.1", true, ""},
		{"CONNECT [::ffff:127.0.0.1]:%s HTTP/1.1", true, ""},
		{"CONNECT [::FFFF:7F00:1]:%s HTTP/1.1", true, ""},
		{"GET http://127.0.0.1.:%s/ HTTP/1.1", true, ""},
		{"CONNECT 127.1:%s HTTP/1.1", false, ambiguous},
		{"CONNECT 127.0.1:%s HTTP/1.1", false, ambiguous},
		{"CONNECT 2130706433:%s HTTP/1.1", false, ambiguous},
		{"CONNECT 0x7f000001:%s HTTP/1.1", false, ambiguous},
		{"CONNECT 0x7f.1:%s HTTP/1.1", false, ambiguous},
		{"CONNECT 0177.0.0.1:%s HTTP/1.1", false, ambiguous},
		{"CONNECT 127.000.000.001:%s HTTP/1.1", false, ambiguous},
		{"CONNECT 127.0.0.1..:%s HTTP/1.1", false, "refused: the host has a label that is empty"},
		// Go's request parser refuses these before the proxy decides.
		{"CONNECT %%31%%32%%37.0.0.1:%s HTTP/1.1", false, "no response"},
		{"CONNECT [fe80::1%%25lo]:%s HTTP/1.1", false, "refused: the host has an IPv6 zone"},
		{"GET http://127.1:%s/ HTTP/1.1", false, ambiguous},
		{"GET http://2130706433:%s/ HTTP/1.1", false, ambiguous},
		{"GET http://0x7f.0.0.1:%s/ HTTP/1.1", false, ambiguous},
	}
	for _, tt := range tests {
		line := fmt.Sprintf(tt.line, port)
		t.Run(line, func(t *testing.T) {
			through, refusal := l.request(t, line)
			dialed, lookups := l.take()
			if through != tt.through || !strings.Contains(refusal, tt.why) || lookups != 0 {
				t.Fatalf("through %v, refusal %q, %d lookups; want through %v, refusal with %q, no lookup", through, refusal, lookups, tt.through, tt.why)
			}
			if tt.through && (len(dialed) != 1 || dialed[0] != "127.0.0.1:"+port) {
				t.Errorf("dialled %q, want 127.0.0.1:%s", dialed, port)
			}
		})
	}
}

// TestEgressAuthorityTricks sends the user-info and backslash tricks:
// whatever the proxy makes of each, it dials what it decided on, so the
// only address reached is the one the allow-list names.
func TestEgressAuthorityTricks(t *testing.T) {
	l := newFloorLab(t, "public.test:80")
	for _, line := range []string{
		"CONNECT public.test@127.0.0.1:80 HTTP/1.1",
		"CONNECT public.test\\@127.0.0.1:80 HTTP/1.1",
		"CONNECT 127.0.0.1#@public.test:80 HTTP/1.1",
		"GET http://public.test@127.0.0.1:80/ HTTP/1.1",
		"GET http://public.test\\@127.0.0.1:80/ HTTP/1.1",
		"GET http://127.0.0.1\\@public.test:80/ HTTP/1.1",
		"GET http://127.0.0.1%2f@public.test:80/ HTTP/1.1",
		"GET http://127.0.0.1:80\\@public.test/ HTTP/1.1",
	} {
		t.Run(line, func(t *testing.T) {
			through, refusal := l.request(t, line)
			dialed, _ := l.take()
			for _, d := range dialed {
				if d != "93.184.215.14:80" {
					t.Fatalf("dialled %s (through %v, %q)", d, through, refusal)
				}
			}
			t.Logf("through %v, dialled %q, refusal %q", through, dialed, refusal)
		})
	}
}
