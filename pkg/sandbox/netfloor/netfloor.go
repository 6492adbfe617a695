// Package netfloor is the address floor under every outbound connection
// the harness makes or relays: the sandbox's egress proxy today, and any
// other dialer (an MCP client, a fetch tool) tomorrow. It imports nothing
// but the standard library.
//
// [Resolve] is the one decision. It takes a host as a client spelled it,
// canonicalises it ([Canonical]), refuses a cloud metadata name, resolves
// the name, and refuses it when any address it resolves to is on the
// floor ([Check]): loopback, private, carrier-grade NAT, link-local and
// the metadata services in it, multicast, broadcast, unspecified,
// documentation, benchmarking and reserved ranges, IPv6 unique-local,
// site-local and link-local, and the IPv6 forms that carry such an IPv4
// address (mapped, NAT64, 6to4) or tunnel through one (Teredo). It
// returns the address to dial; a caller dials that address, not the name,
// so that a second DNS answer cannot send the connection elsewhere.
//
// # The named lift
//
// A policy that names a host literally means it. Resolve lets through a
// metadata name when the policy names that very name, and an address on
// the floor when the policy names that very address ("127.0.0.1:8080",
// "[fd00::1]"). Naming a name never lifts the floor for the addresses it
// resolves to: a name's answers are whatever its DNS says, and rebinding
// a public name to 127.0.0.1 is the attack the floor exists for. A
// wildcard ("*.example.com") names nothing literally.
//
// # Spellings
//
// The C library reads "127.1", "2130706433", "0x7f.1" and "0177.0.0.1"
// as 127.0.0.1; Go's resolver reads them as names. A check that reads a
// spelling one way while the dialer reads it the other is bypassed, so
// Canonical refuses every host that ends in a number but is not four
// plain decimal numbers, instead of guessing which reading is right.
package netfloor

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
)

// ErrSpelling is wrapped by the *Error of a host spelled so that parsers
// disagree on what it names, or not as a host at all.
var ErrSpelling = errors.New("netfloor: not a canonical host")

// ErrFloor is wrapped by the *Error of a host or address the floor
// refuses.
var ErrFloor = errors.New("netfloor: refused by the address floor")

// Error is a refusal.
type Error struct {
	// Host is the host as it was asked for.
	Host string
	// Addr is the address refused, or the zero Addr for a refusal of the
	// host's spelling or name.
	Addr netip.Addr
	// Why says what is wrong, in words that follow the host: "is a
	// loopback address (127.0.0.0/8)", "resolves to 10.0.0.7, a private
	// address (10.0.0.0/8)".
	Why string
	// Err is ErrSpelling or ErrFloor.
	Err error
}

// Error implements error.
func (e *Error) Error() string { return fmt.Sprintf("netfloor: %q %s", e.Host, e.Why) }

// Unwrap returns ErrSpelling or ErrFloor.
func (e *Error) Unwrap() error { return e.Err }

// Resolver is the part of *net.Resolver that [Resolve] uses.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Resolve decides whether host may be reached and returns the address to
// dial. named is the host as the policy names it literally, or "" when
// the policy names it only by a wildcard or not at all (see the named
// lift in the package doc). An address literal is not resolved; a name
// is resolved with r, and refused when any of its addresses is on the
// floor, whichever one a caller would have dialled.
//
// A refusal is an *Error; a failure to resolve is r's error.
func Resolve(ctx context.Context, r Resolver, host, named string) (netip.Addr, error) {
	canon, err := Canonical(host)
	if err != nil {
		return netip.Addr{}, err
	}
	named, err = Canonical(named)
	if err != nil {
		named = ""
	}
	if a, err := netip.ParseAddr(canon); err == nil {
		if why := floor(a); why != "" && named != canon {
			return netip.Addr{}, &Error{Host: host, Addr: a, Why: "is " + why, Err: ErrFloor}
		}
		return a, nil
	}
	if metadataNames[canon] && named != canon {
		return netip.Addr{}, &Error{Host: host, Why: "is the name of a cloud metadata service", Err: ErrFloor}
	}
	addrs, err := r.LookupNetIP(ctx, "ip", canon)
	if err != nil {
		return netip.Addr{}, err
	}
	if len(addrs) == 0 {
		return netip.Addr{}, fmt.Errorf("netfloor: %q has no address", host)
	}
	for _, a := range addrs {
		a = a.Unmap()
		if why := floor(a); why != "" {
			return netip.Addr{}, &Error{Host: host, Addr: a, Why: "resolves to " + a.String() + ", " + why, Err: ErrFloor}
		}
	}
	return addrs[0].Unmap(), nil
}

// Check returns nil when a may be dialled, and an *Error wrapping
// ErrFloor saying why not otherwise. It is the address half of
// [Resolve], for a caller that already holds an address; it knows no
// lift.
func Check(a netip.Addr) error {
	if why := floor(a); why != "" {
		return &Error{Host: a.String(), Addr: a, Why: "is " + why, Err: ErrFloor}
	}
	return nil
}

// Canonical returns the one spelling of host that every parser reads the
// same way, or an *Error wrapping ErrSpelling.
//
//   - An IPv6 address, bracketed or not, is written as net/netip writes
//     it, and one that maps an IPv4 address is written as that address.
//     A zone ("%eth0") is refused.
//   - One trailing dot is dropped; names are lower-cased. A name is
//     letters, digits, '-' and '_' in dot-separated labels of 1 to 63
//     bytes, 253 bytes in all: percent escapes, '\', '@', spaces and
//     non-ASCII names (send their punycode) are refused.
//   - A host whose last label is a number (decimal, or hexadecimal with
//     0x) is an IPv4 address to URL parsers and the C library, so it
//     must be four decimal numbers without leading zeros; "127.1",
//     "2130706433", "0x7f.1", "0177.0.0.1" and "1.2.3.4.5" are refused.
func Canonical(host string) (string, error) {
	bad := func(why string) (string, error) {
		return "", &Error{Host: host, Why: why, Err: ErrSpelling}
	}
	h := host
	if strings.HasPrefix(h, "[") && strings.HasSuffix(h, "]") {
		h = h[1 : len(h)-1]
		if !strings.Contains(h, ":") {
			return bad("is not an IPv6 address in brackets")
		}
	}
	if strings.Contains(h, ":") {
		if strings.Contains(h, "%") {
			return bad("has an IPv6 zone")
		}
		a, err := netip.ParseAddr(h)
		if err != nil || !a.Is6() {
			return bad("is not an IPv6 address")
		}
		return a.Unmap().String(), nil
	}
	h = strings.TrimSuffix(h, ".")
	if h == "" {
		return bad("is empty")
	}
	if len(h) > 253 {
		return bad("is longer than 253 bytes")
	}
	for i := 0; i < len(h); i++ {
		c := h[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.') {
			return bad(fmt.Sprintf("has the character %q, which no host name has", c))
		}
	}
	labels := strings.Split(h, ".")
	for _, l := range labels {
		if l == "" || len(l) > 63 {
			return bad("has a label that is empty or longer than 63 bytes")
		}
	}
	if number(labels[len(labels)-1]) {
		a, err := netip.ParseAddr(h)
		if err != nil || !a.Is4() {
			return bad("ends in a number but is not four decimal numbers: resolvers read such forms differently; write the address as a.b.c.d")
		}
		return a.String(), nil
	}
	return strings.ToLower(h), nil
}

// number reports whether a label is a number to the URL standard's IPv4
// parser: decimal digits (octal too, with a leading 0), or 0x and hex
// digits, none included.
func number(l string) bool {
	if len(l) >= 2 && l[0] == '0' && (l[1] == 'x' || l[1] == 'X') {
		for i := 2; i < len(l); i++ {
			c := l[i]
			if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
				return false
			}
		}
		return true
	}
	for i := 0; i < len(l); i++ {
		if l[i] < '0' || l[i] > '9' {
			return false
		}
	}
	return l != ""
}
