package netfloor_test

import (
	"context"
	"errors"
	"net/netip"
	"strconv"
	"strings"
	"testing"

	"github.com/initorigin/io-harness-go/pkg/sandbox/netfloor"
)

// TestCheck checks each range of the floor at its edges: the first and
// last addresses are refused, and the neighbours just outside are
// allowed (the negative controls).
func TestCheck(t *testing.T) {
	tests := []struct {
		addr string
		want string // a substring of the refusal, or "" for an allowed address
	}{
		// IPv4, range by range, with neighbours.
		{"0.0.0.0", "this network"},
		{"0.255.255.255", "this network"},
		{"1.0.0.0", ""},
		{"9.255.255.255", ""},
		{"10.0.0.0", "private address (10.0.0.0/8)"},
		{"10.255.255.255", "private address (10.0.0.0/8)"},
		{"11.0.0.0", ""},
		{"100.63.255.255", ""},
		{"100.64.0.0", "carrier-grade NAT address (100.64.0.0/10)"},
		{"100.127.255.255", "carrier-grade NAT"},
		{"100.128.0.0", ""},
		{"100.100.100.200", "metadata service (Alibaba Cloud)"},
		{"126.255.255.255", ""},
		{"127.0.0.1", "loopback address (127.0.0.0/8)"},
		{"127.255.255.255", "loopback"},
		{"128.0.0.0", ""},
		{"169.253.255.255", ""},
		{"169.254.0.0", "link-local address (169.254.0.0/16)"},
		{"169.254.169.254", "metadata service (AWS, GCP, Azure"},
		{"169.254.170.2", "ECS task credentials"},
		{"169.254.0.23", "Tencent"},
		{"169.255.0.0", ""},
		{"172.15.255.255", ""},
		{"172.16.0.0", "private address (172.16.0.0/12)"},
		{"172.31.255.255", "private"},
		{"172.32.0.0", ""},
		{"191.255.255.255", ""},
		{"192.0.0.0", "IETF protocol assignment (192.0.0.0/24)"},
		{"192.0.0.192", "Oracle Cloud"},
		{"192.0.0.255", "IETF"},
		{"192.0.1.0", ""},
		{"192.0.2.1", "documentation"},
		{"192.88.99.1", "6to4 relay"},
		{"192.167.255.255", ""},
		{"192.168.0.0", "private address (192.168.0.0/16)"},
		{"192.168.255.255", "private"},
		{"192.169.0.0", ""},
		{"198.17.255.255", ""},
		{"198.18.0.0", "benchmarking address (198.18.0.0/15)"},
		{"198.19.255.255", "benchmarking"},
		{"198.20.0.0", ""},
		{"198.51.100.7", "documentation"},
		{"203.0.113.7", "documentation"},
		{"168.63.129.16", "Azure wire server"},
		{"168.63.129.17", ""},
		{"223.255.255.255", ""},
		{"224.0.0.1", "multicast address (224.0.0.0/4)"},
		{"239.255.255.255", "multicast"},
		{"240.0.0.0", "reserved address (240.0.0.0/4)"},
		{"255.255.255.254", "reserved"},
		{"255.255.255.255", "broadcast address"},
		{"8.8.8.8", ""},
		{"93.184.215.14", ""},
		// IPv6.
		{"::", "unspecified"},
		{"::1", "loopback address (::1)"},
		{"::2", "IPv4-compatible"},
		{"::127.0.0.1", "IPv4-compatible"},
		{"::ffff:127.0.0.1", "loopback address (127.0.0.0/8)"},
		{"::ffff:10.1.2.3", "private address (10.0.0.0/8)"},
		{"::ffff:8.8.8.8", ""},
		{"::ffff:0:127.0.0.1", "IPv4-translated"},
		{"64:ff9b::7f00:1", "NAT64 address (64:ff9b::/96) of 127.0.0.1, a loopback address"},
		{"64:ff9b::a9fe:a9fe", "NAT64 address (64:ff9b::/96) of 169.254.169.254, a cloud metadata service"},
		{"64:ff9b::808:808", ""}, // NAT64 of 8.8.8.8: how an IPv6-only host reaches it
		{"64:ff9b:1::1", "local-use NAT64"},
		{"100::1", "discard-only"},
		{"2001::1", "Teredo address (2001::/32)"},
		{"2001:0:4136:e378:8000:63bf:3fff:fdd2", "Teredo"},
		{"2001:db8::1", "documentation address (2001:db8::/32)"},
		{"2001:2::1", "IETF protocol assignment (2001::/23)"},
		{"2001:200::1", ""}, // just past 2001::/23
		{"2002:7f00:1::1", "6to4 address (2002::/16) of 127.0.0.1, a loopback address"},
		{"2002:c0a8:101::1", "6to4 address (2002::/16) of 192.168.1.1, a private address"},
		{"2002:808:808::1", ""},
		{"3fff::1", "documentation address (3fff::/20)"},
		{"3ffe:ffff::1", ""},
		{"5f00::1", "segment routing"},
		{"fbff:ffff::1", "outside global unicast"},
		{"fc00::1", "unique-local address (fc00::/7)"},
		{"fd00:ec2::254", "metadata service (AWS, IPv6)"},
		{"fdff:ffff::1", "unique-local"},
		{"fe80::1", "link-local address (fe80::/10)"},
		{"fe80::1%eth0", "link-local"},
		{"febf::1", "link-local"},
		{"fec0::1", "site-local"},
		{"ff02::1", "multicast address (ff00::/8)"},
		{"4000::1", "outside global unicast (2000::/3)"},
		{"1fff::1", "outside global unicast"},
		{"2606:4700::1111", ""},
		{"2a00:1450:4001:80b::200e", ""},
	}
	for _, tt := range tests {
		t.Run(tt.addr, func(t *testing.T) {
			err := netfloor.Check(netip.MustParseAddr(tt.addr))
			if tt.want == "" {
				if err != nil {
					t.Fatalf("Check(%s) = %v, want it allowed", tt.addr, err)
				}
				return
			}
			if err == nil || !errors.Is(err, netfloor.ErrFloor) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Check(%s) = %v, want a refusal naming %q", tt.addr, err, tt.want)
			}
		})
	}
}

func TestCanonical(t *testing.T) {
	tests := []struct {
		host, want string // want "" is a refusal
	}{
		{"example.com", "example.com"},
		{"Example.COM.", "example.com"},
		{"_dmarc.example.com", "_dmarc.example.com"},
		{"localhost", "localhost"},
		{"127.0.0.1", "127.0.0.1"},
		{"127.0.0.1.", "127.0.0.1"},
		{"0.0.0.0", "0.0.0.0"},
		{"::1", "::1"},
		{"[::1]", "::1"},
		{"[0:0:0:0:0:0:0:1]", "::1"},
		{"[::FFFF:127.0.0.1]", "127.0.0.1"},
		{"::ffff:7f00:1", "127.0.0.1"},
		{"[2001:DB8::1]", "2001:db8::1"},
		{"1.2.3.com", "1.2.3.com"},
		{"0x7f.example", "0x7f.example"}, // a name: its last label is no number
		// Numbers that parsers read differently.
		{"127.1", ""},
		{"127.0.1", ""},
		{"2130706433", ""},
		{"2130706433.", ""},
		{"0x7f000001", ""},
		{"0x7f.1", ""},
		{"0x7F.0.0.1", ""},
		{"0177.0.0.1", ""},
		{"127.000.000.001", ""},
		{"127.0.0.01", ""},
		{"010.0.0.1", ""},
		{"1.2.3.4.5", ""},
		{"256.0.0.1", ""},
		{"example.0x", ""},
		{"example.123", ""},
		{"0", ""},
		// Not host names.
		{"", ""},
		{".", ""},
		{"example.com..", ""},
		{"a..b", ""},
		{"%31%32%37.0.0.1", ""},
		{"127.0.0.1%00", ""},
		{"evil.com\\@127.0.0.1", ""},
		{"user@127.0.0.1", ""},
		{"127.0.0.1 ", ""},
		{" 127.0.0.1", ""},
		{"127.0.0.1\t", ""},
		{"exa mple.com", ""},
		{"ex\u00e4mple.com", ""},
		{"ex\uff0eample.com", ""},
		{"fe80::1%eth0", ""},
		{"[fe80::1%25eth0]", ""},
		{"[127.0.0.1]", ""},
		{"[::1", ""},
		{"::1]", ""},
		{"1:2:3", ""},
		{strings.Repeat("a", 64) + ".com", ""},
		{strings.Repeat("a.", 127) + "com", ""},
	}
	for _, tt := range tests {
		t.Run(tt.host, func(t *testing.T) {
			got, err := netfloor.Canonical(tt.host)
			if tt.want == "" {
				if err == nil || !errors.Is(err, netfloor.ErrSpelling) {
					t.Fatalf("Canonical(%q) = %q, %v; want ErrSpelling", tt.host, got, err)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("Canonical(%q) = %q, %v; want %q", tt.host, got, err, tt.want)
			}
		})
	}
}

// resolver answers from a table, and counts its lookups.
type resolver struct {
	answers map[string][]string
	asked   []string
}

func (r *resolver) LookupNetIP(_ context.Context, network, host string) ([]netip.Addr, error) {
	r.asked = append(r.asked, host)
	var out []netip.Addr
	for _, a := range r.answers[host] {
		out = append(out, netip.MustParseAddr(a))
	}
	if len(out) == 0 {
		return nil, errors.New("no such host")
	}
	return out, nil
}

func TestResolve(t *testing.T) {
	r := &resolver{answers: map[string][]string{
		"example.com":              {"93.184.215.14", "2606:2800:21f::1"},
		"rebound.example":          {"127.0.0.1"},
		"split.example":            {"93.184.215.14", "10.0.0.7"},
		"mapped.example":           {"::ffff:10.0.0.7"},
		"nat64.example":            {"64:ff9b::a9fe:a9fe"},
		"cgnat.example":            {"100.64.1.1"},
		"metadata.google.internal": {"169.254.169.254"},
		"public-metadata.example":  {"8.8.4.4"},
		"metadata.goog":            {"8.8.4.4"},
	}}
	tests := []struct {
		name, host, named string
		want              string // the address dialled, or "" for a refusal
		why               string // a substring of the refusal
	}{
		{"a public name", "example.com", "example.com", "93.184.215.14", ""},
		{"a public name by a wildcard", "example.com", "", "93.184.215.14", ""},
		{"a public address", "8.8.8.8", "", "8.8.8.8", ""},
		{"a name rebound to loopback", "rebound.example", "rebound.example", "", "resolves to 127.0.0.1, a loopback address"},
		{"one private answer among public ones", "split.example", "split.example", "", "resolves to 10.0.0.7, a private address"},
		{"a mapped answer", "mapped.example", "", "", "resolves to 10.0.0.7"},
		{"a NAT64 answer of the metadata address", "nat64.example", "", "", "NAT64 address (64:ff9b::/96) of 169.254.169.254"},
		{"a CGNAT answer", "cgnat.example", "cgnat.example", "", "carrier-grade NAT"},
		{"naming a name does not lift its answers", "rebound.example", "rebound.example", "", "loopback"},
		{"loopback, not named", "127.0.0.1", "", "", "is a loopback address"},
		{"loopback, named", "127.0.0.1", "127.0.0.1", "127.0.0.1", ""},
		{"loopback, named in another spelling", "[::ffff:127.0.0.1]", "127.0.0.1.", "127.0.0.1", ""},
		{"loopback, another loopback named", "127.0.0.2", "127.0.0.1", "", "loopback"},
		{"CGNAT, not named", "100.64.0.1", "", "", "carrier-grade NAT"},
		{"CGNAT, named", "100.64.0.1", "100.64.0.1", "100.64.0.1", ""},
		{"metadata address, not named", "169.254.169.254", "", "", "cloud metadata service"},
		{"metadata address, named", "169.254.169.254", "169.254.169.254", "169.254.169.254", ""},
		{"AWS IPv6 metadata, named", "[fd00:ec2::254]", "fd00:ec2::254", "fd00:ec2::254", ""},
		{"a metadata name, not named", "metadata.google.internal", "", "", "is the name of a cloud metadata service"},
		{"a metadata name with a trailing dot", "METADATA.goog.", "", "", "is the name of a cloud metadata service"},
		{"a metadata name, named: its address is still refused", "metadata.google.internal", "metadata.google.internal", "", "resolves to 169.254.169.254"},
		{"a metadata name, named, answering a public address", "metadata.goog", "metadata.goog", "8.8.4.4", ""},
		{"a short form, named in the same spelling", "127.1", "127.1", "", "ends in a number"},
		{"a decimal form", "2130706433", "", "", "ends in a number"},
		{"an unknown name", "nowhere.example", "", "", "no such host"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r.asked = nil
			got, err := netfloor.Resolve(context.Background(), r, tt.host, tt.named)
			if tt.want != "" {
				if err != nil || got != netip.MustParseAddr(tt.want) {
					t.Fatalf("Resolve(%q, named %q) = %v, %v; want %s", tt.host, tt.named, got, err, tt.want)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.why) {
				t.Fatalf("Resolve(%q, named %q) = %v, %v; want a refusal naming %q", tt.host, tt.named, got, err, tt.why)
			}
			var fe *netfloor.Error
			if errors.As(err, &fe) && fe.Addr.IsValid() == false && errors.Is(err, netfloor.ErrFloor) && len(r.asked) > 0 {
				t.Errorf("a refusal by name asked the resolver for %q first", r.asked)
			}
		})
	}
}

// inetAton is the C library's inet_aton: one to four parts, each
// decimal, octal with a leading 0, or hexadecimal with 0x; the last part
// fills the bytes that remain. It is the reading that Canonical must
// never disagree with.
func inetAton(s string) (netip.Addr, bool) {
	parts := strings.Split(s, ".")
	if len(parts) > 4 {
		return netip.Addr{}, false
	}
	vals := make([]uint64, len(parts))
	for i, p := range parts {
		base := 10
		switch {
		case len(p) > 1 && (p[:2] == "0x" || p[:2] == "0X"):
			base, p = 16, p[2:]
			if p == "" {
				p = "0"
			}
		case len(p) > 1 && p[0] == '0':
			base, p = 8, p[1:]
		}
		v, err := strconv.ParseUint(p, base, 32)
		if err != nil || p == "" || p[0] == '+' || p[0] == '-' {
			return netip.Addr{}, false
		}
		vals[i] = v
	}
	var b [4]byte
	for i, v := range vals[:len(vals)-1] {
		if v > 255 {
			return netip.Addr{}, false
		}
		b[i] = byte(v)
	}
	last, room := vals[len(vals)-1], 4-(len(vals)-1)
	if last >= 1<<(8*room) {
		return netip.Addr{}, false
	}
	for i := 3; i >= len(vals)-1; i-- {
		b[i] = byte(last)
		last >>= 8
	}
	return netip.AddrFrom4(b), true
}

// FuzzCanonical compares Canonical with net/netip and with the C
// library's reading of an address:
//   - what netip reads as an address without a zone is accepted as that
//     address;
//   - what Canonical returns is canonical again, reads as the same
//     address under netip when it is one, and is never a name that
//     inet_aton would read as an address;
//   - a host inet_aton reads as an address is refused, or is that very
//     address.
func FuzzCanonical(f *testing.F) {
	for _, s := range []string{"127.0.0.1", "127.1", "2130706433", "0x7f.1", "0177.0.0.1", "127.0.0.1.", "[::ffff:127.0.0.1]",
		"example.com", "Example.COM.", "::1", "fe80::1%eth0", "1.2.3.4.5", "a..b", "%31", "evil\\@x", "0x", "09.1.1.1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, host string) {
		got, err := netfloor.Canonical(host)
		// A trailing dot ends a name or an IPv4 address; no IPv6 spelling
		// has one.
		bare := host
		if !strings.Contains(host, ":") {
			bare = strings.TrimSuffix(host, ".")
		}
		if a, perr := netip.ParseAddr(bare); perr == nil && a.Zone() == "" && !strings.HasSuffix(host, "..") {
			if err != nil || got != a.Unmap().String() {
				t.Fatalf("netip reads %q as %s; Canonical = %q, %v", host, a, got, err)
			}
		}
		if aton, ok := inetAton(bare); ok && err == nil && got != aton.String() {
			t.Fatalf("inet_aton reads %q as %s; Canonical = %q", host, aton, got)
		}
		if err != nil {
			if !errors.Is(err, netfloor.ErrSpelling) {
				t.Fatalf("Canonical(%q): %v does not wrap ErrSpelling", host, err)
			}
			return
		}
		again, err := netfloor.Canonical(got)
		if err != nil || again != got {
			t.Fatalf("Canonical(%q) = %q, but Canonical(%q) = %q, %v", host, got, got, again, err)
		}
		if a, perr := netip.ParseAddr(got); perr == nil {
			if a.String() != got || a.Is4In6() {
				t.Fatalf("Canonical(%q) = %q, which netip writes %s", host, got, a)
			}
			return
		}
		if _, ok := inetAton(got); ok {
			t.Fatalf("Canonical(%q) = %q, a name the C library reads as an address", host, got)
		}
	})
}

// FuzzCheck compares the floor with net/netip's own predicates: what
// netip calls loopback, private, link-local, multicast, unspecified or
// not global unicast is refused, in every IPv6 form that carries it.
func FuzzCheck(f *testing.F) {
	f.Add([]byte{127, 0, 0, 1})
	f.Add([]byte{0xfe, 0x80, 15: 1})
	f.Add([]byte{0x20, 0x02, 10, 0, 0, 1, 15: 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		var a netip.Addr
		switch len(b) {
		case 4:
			a = netip.AddrFrom4([4]byte(b))
		case 16:
			a = netip.AddrFrom16([16]byte(b))
		default:
			return
		}
		local := func(a netip.Addr) bool {
			a = a.Unmap()
			return a.IsLoopback() || a.IsPrivate() || a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast() ||
				a.IsInterfaceLocalMulticast() || a.IsMulticast() || a.IsUnspecified() || !a.IsGlobalUnicast()
		}
		err := netfloor.Check(a)
		if local(a) && err == nil {
			t.Fatalf("netip calls %s local; Check allows it", a)
		}
		if err != nil && !errors.Is(err, netfloor.ErrFloor) {
			t.Fatalf("Check(%s): %v does not wrap ErrFloor", a, err)
		}
		if a.Is4() {
			v4 := a.As4()
			for _, form := range []netip.Addr{
				netip.AddrFrom16(a.As16()), // ::ffff:a.b.c.d
				netip.AddrFrom16([16]byte{0, 0x64, 0xff, 0x9b, 12: v4[0], 13: v4[1], 14: v4[2], 15: v4[3]}),
				netip.AddrFrom16([16]byte{0x20, 0x02, v4[0], v4[1], v4[2], v4[3]}),
			} {
				if (netfloor.Check(form) == nil) != (err == nil) {
					t.Fatalf("Check(%s) = %v but Check(%s) = %v", a, err, form, netfloor.Check(form))
				}
			}
		}
	})
}
