//go:build linux && cgo

package spawn

import "testing"

// FuzzDecode feeds the C decoder anything (it must not crash or leak into
// a crash later), and checks that whatever Encode makes, it accepts.
func FuzzDecode(f *testing.F) {
	full := &Request{
		Argv: []string{"sh", "-c", ""}, Env: []string{"A=1"}, Workdir: "/w",
		ReadOnly: []string{"/ro"}, Writable: []string{"/rw"}, Hide: []string{"/h"},
		Rlimits: []Rlimit{{Resource: 0, Soft: 2, Hard: 3}},
		Flags:   NS | Seccomp | Overlay, TmpfsSize: 1 << 20, ProbePath: "/p", ProbeDial: 9, ListenPort: 3128,
		RunAs: true, UID: 65534, GID: 65534,
	}
	f.Add(full.Encode(), "x", uint16(80))
	f.Add([]byte{}, "", uint16(0))
	f.Add([]byte{1, 0, 0, 0, 255, 255, 255, 255}, "/", uint16(65535))
	f.Fuzz(func(t *testing.T, b []byte, s string, port uint16) {
		decodes(b)
		r := &Request{
			Argv: []string{s, s}, Env: []string{s}, Workdir: s, ReadOnly: []string{s}, Writable: []string{s},
			Hide: []string{s}, Rlimits: []Rlimit{{Resource: int(port), Soft: uint64(port), Hard: uint64(port)}},
			Flags: Flags(port), TmpfsSize: uint64(port), ProbePath: s, ProbeDial: int(port), ListenPort: int(port),
			RunAs: port%2 == 0, UID: uint32(port), GID: uint32(port),
		}
		if !decodes(r.Encode()) {
			t.Errorf("the decoder refused what Encode made of %q, %d", s, port)
		}
	})
}
