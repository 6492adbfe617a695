// Command capi is the C ABI of io-harness: built with
//
//	go build -buildmode=c-shared -trimpath \
//	  -ldflags '-extldflags "-Wl,--version-script=capi/exports.map -Wl,-soname,libio_harness.so.1"' \
//	  -o bin/libio_harness.so.1 ./capi
//
// it is libio_harness.so.1, whose functions include/io_harness.h declares
// and docs/abi.md specifies. This package holds the wrappers only: every
// behaviour lives in internal/abi, which is pure Go and tested without a
// host. The public functions are C (guard.c): each refuses to enter Go in
// a process forked after the library was loaded, then calls its Go
// implementation here (ioh_go_*, hidden by the version script). Each Go
// wrapper converts C values, calls the table and recovers any panic, so
// that a bug is an error envelope (or a status code), never a crash of
// the host process.
//
// # The one global
//
// A C caller has nowhere to keep a Go value, so the library holds one
// handle table, [table], for the life of the process. It is built by a
// constructor that does no work that can fail and reads no environment
// variable: loading the library never fails for a reason of ours. The
// environment is read only when a harness is opened with
// "use_environment": true, and then only for provider keys, models and
// base URLs.
package main

/*
#include <stdlib.h>
#include <stdint.h>
#include <pthread.h>
#include "io_harness.h"

#cgo CFLAGS: -I${SRCDIR}/../include

// cgo writes char* for *C.char; this typedef makes the generated
// prototypes say const char*, so that the generated header and
// include/io_harness.h must agree (a test compiles both together).
typedef const char io_harness_cstr;

static inline void ioh_invoke(io_harness_event_cb cb, void *user, const char *event_json) {
	cb(user, event_json);
}

static inline uint64_t ioh_thread_id(void) {
	return (uint64_t)(uintptr_t)pthread_self();
}
*/
import "C"

import (
	"context"
	"os"
	"time"
	"unsafe"

	"github.com/initorigin/io-harness-go/internal/abi"
)

// table is the library's handle table; see the package doc.
var table = abi.New(&abi.Options{
	LookupEnv: os.LookupEnv,
	ThreadID:  func() uint64 { return uint64(C.ioh_thread_id()) },
})

func main() {}

// cstring hands out a copy of b as a C string owned by the caller.
func cstring(b []byte) *C.char {
	if b == nil {
		return nil
	}
	table.NoteStringOut()
	return C.CString(string(b))
}

//export ioh_go_call
func ioh_go_call(request *C.io_harness_cstr, n C.size_t) (out *C.char) {
	defer func() {
		if r := recover(); r != nil {
			out = cstring(abi.PanicEnvelope(r))
		}
	}()
	if uint64(n) > abi.MaxRequestBytes {
		return cstring(abi.TooLargeEnvelope(-1))
	}
	var req []byte
	if request != nil {
		req = C.GoBytes(unsafe.Pointer(request), C.int(n))
	}
	return cstring(table.Call(context.Background(), req))
}

//export ioh_go_free
func ioh_go_free(s *C.char) {
	defer func() { _ = recover() }()
	if s == nil {
		return
	}
	table.NoteStringFreed()
	C.free(unsafe.Pointer(s))
}

//export ioh_go_poll
func ioh_go_poll(harness C.uint64_t, timeoutMS C.int32_t, maxEvents C.int32_t, status *C.int32_t) (out *C.char) {
	defer func() {
		if r := recover(); r != nil {
			out = nil
			if status != nil {
				*status = C.int32_t(abi.StatusUnknownHandle)
			}
		}
	}()
	b, st := table.PollStatus(uint64(harness), time.Duration(timeoutMS)*time.Millisecond, int(maxEvents))
	if status != nil {
		*status = C.int32_t(st)
	}
	return cstring(b)
}

//export ioh_go_set_event_callback
func ioh_go_set_event_callback(harness C.uint64_t, cb C.io_harness_event_cb, user unsafe.Pointer) (status C.int32_t) {
	defer func() {
		if r := recover(); r != nil {
			status = C.int32_t(abi.StatusIllegalContext)
		}
	}()
	var fn func([]byte)
	if cb != nil {
		fn = func(ev []byte) {
			s := C.CString(string(ev))
			table.NoteCallbackString()
			C.ioh_invoke(cb, user, s)
			C.free(unsafe.Pointer(s))
		}
	}
	return C.int32_t(table.SetCallback(uint64(harness), fn))
}

//export ioh_go_cancel
func ioh_go_cancel(handle C.uint64_t) (status C.int32_t) {
	defer func() {
		if r := recover(); r != nil {
			status = C.int32_t(abi.StatusUnknownHandle)
		}
	}()
	return C.int32_t(table.Cancel(uint64(handle)))
}

//export ioh_go_close
func ioh_go_close(harness C.uint64_t, timeoutMS C.int32_t) (status C.int32_t) {
	defer func() {
		if r := recover(); r != nil {
			status = C.int32_t(abi.StatusUnknownHandle)
		}
	}()
	return C.int32_t(table.Close(uint64(harness), time.Duration(timeoutMS)*time.Millisecond))
}
