package spawn

import (
	"encoding/binary"
	"errors"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// record is one decoded record of the wire format.
type record struct {
	Tag uint32
	Val []byte
}

func decode(t *testing.T, b []byte) []record {
	t.Helper()
	var out []record
	for len(b) > 0 {
		if len(b) < 8 {
			t.Fatalf("truncated header: %x", b)
		}
		tag, n := binary.NativeEndian.Uint32(b), binary.NativeEndian.Uint32(b[4:])
		if uint32(len(b)-8) < n {
			t.Fatalf("record %d claims %d bytes, %d left", tag, n, len(b)-8)
		}
		out = append(out, record{tag, b[8 : 8+n]})
		b = b[8+n:]
	}
	return out
}

func TestEncode(t *testing.T) {
	r := &Request{
		Argv: []string{"sh", "-c", ""}, Env: []string{"A=1"}, Workdir: "/w",
		ReadOnly: []string{"/ro"}, Writable: []string{"/rw"}, Hide: []string{"/h"},
		Rlimits: []Rlimit{{Resource: 0, Soft: 2, Hard: 3}},
		Flags:   NS | Seccomp | Overlay, TmpfsSize: 1 << 20, ProbePath: "/p", ProbeDial: 9, ListenPort: 3128,
		RunAs: true, UID: 65534, GID: 65533,
	}
	u32 := func(v uint32) []byte { return binary.NativeEndian.AppendUint32(nil, v) }
	u64 := func(v uint64) []byte { return binary.NativeEndian.AppendUint64(nil, v) }
	rl := binary.NativeEndian.AppendUint32(nil, 0)
	rl = binary.NativeEndian.AppendUint32(rl, 0)
	rl = append(append(rl, u64(2)...), u64(3)...)
	want := []record{
		{tagArg, []byte("sh")}, {tagArg, []byte("-c")}, {tagArg, []byte{}},
		{tagEnv, []byte("A=1")}, {tagWorkdir, []byte("/w")}, {tagRO, []byte("/ro")}, {tagRW, []byte("/rw")},
		{tagHide, []byte("/h")}, {tagRlimit, rl}, {tagFlags, u64(uint64(NS | Seccomp | Overlay))}, {tagTmpfsSize, u64(1 << 20)},
		{tagProbePath, []byte("/p")}, {tagListenPort, u32(3128)}, {tagProbeDial, u32(9)},
		{tagRunAs, append(u32(65534), u32(65533)...)},
	}
	if diff := cmp.Diff(want, decode(t, r.Encode())); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

func TestSetupError(t *testing.T) {
	err := error(&SetupError{Stage: "mount: private /proc", Errno: syscall.EPERM})
	if !errors.Is(err, syscall.EPERM) || err.Error() != "mount: private /proc: operation not permitted" {
		t.Errorf("%v", err)
	}
	check := &SetupError{Stage: "probe: a write outside the workdir succeeded"}
	if check.Unwrap() != nil || check.Error() != check.Stage {
		t.Errorf("a failed check: %v", check)
	}
}
