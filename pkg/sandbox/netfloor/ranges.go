package netfloor

import "net/netip"

// span is a range of the floor and what it is.
type span struct {
	prefix netip.Prefix
	what   string
}

func spans(list ...string) []span {
	out := make([]span, 0, len(list)/2)
	for i := 0; i < len(list); i += 2 {
		out = append(out, span{netip.MustParsePrefix(list[i]), list[i+1]})
	}
	return out
}

// metadata are the addresses of cloud metadata services, checked first
// so that a refusal names them. Most lie in ranges the floor refuses
// anyway; Azure's wire server is a public address.
var metadata = spans(
	"169.254.169.254/32", "a cloud metadata service (AWS, GCP, Azure, OpenStack and others)",
	"169.254.170.2/32", "a cloud metadata service (AWS ECS task credentials)",
	"169.254.0.23/32", "a cloud metadata service (Tencent Cloud)",
	"100.100.100.200/32", "a cloud metadata service (Alibaba Cloud)",
	"192.0.0.192/32", "a cloud metadata service (Oracle Cloud)",
	"168.63.129.16/32", "a cloud platform service (Azure wire server)",
	"fd00:ec2::254/128", "a cloud metadata service (AWS, IPv6)",
)

// v4 are the IPv4 ranges of the floor: every block of the IANA IPv4
// special-purpose registry that is not globally reachable, with the
// whole of 192.0.0.0/24 (whose two anycast exceptions nobody needs from
// a sandbox) and the limited broadcast address inside 240.0.0.0/4.
var v4 = spans(
	"0.0.0.0/8", "a \"this network\" address (0.0.0.0/8)",
	"10.0.0.0/8", "a private address (10.0.0.0/8)",
	"100.64.0.0/10", "a carrier-grade NAT address (100.64.0.0/10)",
	"127.0.0.0/8", "a loopback address (127.0.0.0/8)",
	"169.254.0.0/16", "a link-local address (169.254.0.0/16)",
	"172.16.0.0/12", "a private address (172.16.0.0/12)",
	"192.0.0.0/24", "an IETF protocol assignment (192.0.0.0/24)",
	"192.0.2.0/24", "a documentation address (192.0.2.0/24)",
	"192.88.99.0/24", "a 6to4 relay anycast address (192.88.99.0/24)",
	"192.168.0.0/16", "a private address (192.168.0.0/16)",
	"198.18.0.0/15", "a benchmarking address (198.18.0.0/15)",
	"198.51.100.0/24", "a documentation address (198.51.100.0/24)",
	"203.0.113.0/24", "a documentation address (203.0.113.0/24)",
	"224.0.0.0/4", "a multicast address (224.0.0.0/4)",
	"255.255.255.255/32", "a broadcast address (255.255.255.255)",
	"240.0.0.0/4", "a reserved address (240.0.0.0/4)",
)

// v6 are the IPv6 ranges of the floor, after the ones that carry an IPv4
// address, which [floor] decides by that address. Addresses outside
// 2000::/3 that no entry names are refused as not global unicast.
var v6 = spans(
	"::/128", "an unspecified address (::)",
	"::1/128", "a loopback address (::1)",
	"::/96", "an IPv4-compatible address (::/96, deprecated)",
	"::ffff:0:0:0/96", "an IPv4-translated address (::ffff:0:0:0/96)",
	"64:ff9b:1::/48", "a local-use NAT64 address (64:ff9b:1::/48)",
	"100::/64", "a discard-only address (100::/64)",
	"2001::/32", "a Teredo address (2001::/32)",
	"2001:db8::/32", "a documentation address (2001:db8::/32)",
	"2001::/23", "an IETF protocol assignment (2001::/23)",
	"3fff::/20", "a documentation address (3fff::/20)",
	"5f00::/16", "a segment routing address (5f00::/16)",
	"fc00::/7", "a unique-local address (fc00::/7)",
	"fe80::/10", "a link-local address (fe80::/10)",
	"fec0::/10", "a site-local address (fec0::/10, deprecated)",
	"ff00::/8", "a multicast address (ff00::/8)",
)

var (
	nat64     = netip.MustParsePrefix("64:ff9b::/96")
	sixToFour = netip.MustParsePrefix("2002::/16")
	global6   = netip.MustParsePrefix("2000::/3")
)

// metadataNames are the names of cloud metadata services, canonical.
// "metadata" and "instance-data" are what those clouds' search domains
// complete.
var metadataNames = map[string]bool{
	"metadata.google.internal":     true,
	"metadata.goog":                true,
	"metadata":                     true,
	"instance-data":                true,
	"instance-data.ec2.internal":   true,
	"metadata.tencentyun.com":      true,
	"metadata.platformequinix.com": true,
	"metadata.packet.net":          true,
}

// floor returns what a is, when it is on the floor, and "" otherwise.
func floor(a netip.Addr) string {
	a = a.Unmap().WithZone("")
	if !a.IsValid() {
		return "an invalid address"
	}
	for _, s := range metadata {
		if s.prefix.Contains(a) {
			return s.what
		}
	}
	if a.Is4() {
		for _, s := range v4 {
			if s.prefix.Contains(a) {
				return s.what
			}
		}
		return ""
	}
	b := a.As16()
	switch {
	case nat64.Contains(a):
		v := netip.AddrFrom4([4]byte(b[12:16]))
		if why := floor(v); why != "" {
			return "a NAT64 address (64:ff9b::/96) of " + v.String() + ", " + why
		}
		return ""
	case sixToFour.Contains(a):
		v := netip.AddrFrom4([4]byte(b[2:6]))
		if why := floor(v); why != "" {
			return "a 6to4 address (2002::/16) of " + v.String() + ", " + why
		}
		return ""
	}
	for _, s := range v6 {
		if s.prefix.Contains(a) {
			return s.what
		}
	}
	if !global6.Contains(a) {
		return "an address outside global unicast (2000::/3)"
	}
	return ""
}
