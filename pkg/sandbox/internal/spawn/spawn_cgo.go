//go:build linux && cgo

package spawn

/*
#cgo CFLAGS: -O2 -Wall -Wno-unused-result
#include "spawn.h"
*/
import "C"

import (
	"syscall"
	"unsafe"
)

// InProcess reports whether the spawner is compiled into this binary.
const InProcess = true

// Spawn builds the sandbox and starts r's payload with the given stdio
// fds, returning once it has exec'd (or, in probe mode, passed its
// checks: then Pid is -1). The calling goroutine must be locked to its
// thread, and the thread must outlive the child: the child's
// parent-death signal is tied to it. A failure is a *SetupError.
func Spawn(r *Request, stdin, stdout, stderr int) (Child, error) {
	buf := r.Encode()
	var res C.struct_iohs_result
	rc := C.iohs_spawn_wire((*C.uint8_t)(unsafe.Pointer(&buf[0])), C.size_t(len(buf)),
		C.int(stdin), C.int(stdout), C.int(stderr), &res)
	if rc != 0 {
		return Child{}, &SetupError{Stage: C.GoString(res.stage), Errno: syscall.Errno(res.err)}
	}
	return Child{Pid: int(res.pid), Pidfd: int(res.pidfd), Listener: int(res.listener), Scratch: int(res.scratch)}, nil
}

// decodes reports whether the C decoder accepts b. The fuzz test feeds it
// anything: it must never crash.
func decodes(b []byte) bool {
	var s C.struct_iohs_spec
	var r C.struct_iohs_result
	var p *C.uint8_t
	if len(b) > 0 {
		p = (*C.uint8_t)(unsafe.Pointer(&b[0]))
	}
	rc := C.iohs_decode(p, C.size_t(len(b)), &s, &r)
	C.iohs_spec_free(&s)
	return rc == 0
}
