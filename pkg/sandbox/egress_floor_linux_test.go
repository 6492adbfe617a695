package sandbox

import (
	"net"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestEgressSpellingsSandboxed has a sandboxed command ask the proxy for
// an allowed loopback server in the spellings the C library reads as
// 127.0.0.1 and Go's resolver as names: each is refused by its spelling,
// though the allow-list names 127.0.0.1. The spellings that mean
// 127.0.0.1 to every parser are the control, and reach it.
func TestEgressSpellingsSandboxed(t *testing.T) {
	echo := echoServer(t)
	_, port, _ := net.SplitHostPort(echo)
	allow := Network{Allow: []string{echo}}
	const ambiguous = "the host ends in a number but is not four decimal numbers: resolvers read such forms differently; write the address as a.b.c.d"
	served := 0
	for _, n := range linuxSandboxes(t, false) {
		if n.sb.Enforcement().Network == NetworkOpen {
			continue
		}
		t.Run(n.label, func(t *testing.T) {
			if res := attempt(t, n.sb, Spec{Network: allow}, "connect", echo); res.Enforced.Network != NetworkAllowList {
				t.Logf("%s does not serve an allow-list (network %q): nothing to judge", n.label, res.Enforced.Network)
				return
			}
			served++
			for _, c := range []struct {
				host string
				want int
				why  string // the proxy's reason for a refusal
			}{
				{"127.0.0.1", escaped, ""},
				{"127.0.0.1.", escaped, ""},
				{"[::ffff:127.0.0.1]", escaped, ""},
				{"127.1", contained, ambiguous},
				{"2130706433", contained, ambiguous},
				{"0x7f.1", contained, ambiguous},
				{"0x7f000001", contained, ambiguous},
				{"0177.0.0.1", contained, ambiguous},
				{"127.0.0.01", contained, ambiguous},
			} {
				target := c.host + ":" + port
				res := attempt(t, n.sb, Spec{Network: allow}, "connect", target)
				if res.ExitCode != c.want {
					t.Errorf("connect %s: exit %d, want %d: %s %s", target, res.ExitCode, c.want, res.Stdout, res.Stderr)
				}
				if c.want == contained {
					want := []Connection{{Host: c.host, Port: mustPort(t, echo), Reason: c.why}}
					if diff := cmp.Diff(want, res.Egress); diff != "" {
						t.Errorf("connect %s: egress decisions (-want +got):\n%s", target, diff)
					}
				} else if len(res.Egress) != 1 || !res.Egress[0].Allowed || !strings.Contains(res.Egress[0].Reason, echo) {
					t.Errorf("connect %s: egress decisions %+v, want one allowed by %q", target, res.Egress, echo)
				}
			}
		})
	}
	if served == 0 {
		t.Skip("no backend here serves an egress allow-list")
	}
}
