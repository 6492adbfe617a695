// Command capi is the C ABI of io-harness: built with
//
//	go build -buildmode=c-shared -trimpath \
//	  -ldflags '-extldflags "-Wl,--version-script=capi/exports.map -Wl,-soname,libio_harness.so.1"' \
//	  -o bin/libio_harness.so.1 ./capi
//
// it is libio_harness.so.1, whose functions include/io_harness.h declares
// and docs/abi.md specifies. This package holds the //export wrappers
// only: every behaviour lives in internal/abi, which is pure Go and tested
// without a host. Each wrapper converts C values, calls the table and
// recovers any panic, so that a bug is an error envelope (or a status
// code), never a crash of the host process.
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

//export io_harness_abi_version
func io_harness_abi_version() C.uint32_t {
	return C.uint32_t(abi.ABIVersion)
}

//export io_harness_call
func io_harness_call(request *C.io_harness_cstr) (out *C.char) {
	defer func() {
		if r := recover(); r != nil {
			out = cstring(abi.PanicEnvelope(r))
		}
	}()
	var req []byte
	if request != nil {
		req = []byte(C.GoString((*C.char)(unsafe.Pointer(request))))
	}
	return cstring(table.Call(context.Background(), req))
}

//export io_harness_free
func io_harness_free(s *C.char) {
	defer func() { _ = recover() }()
	if s == nil {
		return
	}
	table.NoteStringFreed()
	C.free(unsafe.Pointer(s))
}

//export io_harness_poll
func io_harness_poll(harness C.uint64_t, timeoutMS C.int32_t, maxEvents C.int32_t) (out *C.char) {
	defer func() {
		if r := recover(); r != nil {
			out = nil
		}
	}()
	return cstring(table.Poll(uint64(harness), time.Duration(timeoutMS)*time.Millisecond, int(maxEvents)))
}

//export io_harness_set_event_callback
func io_harness_set_event_callback(harness C.uint64_t, cb C.io_harness_event_cb, user unsafe.Pointer) (status C.int32_t) {
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

//export io_harness_cancel
func io_harness_cancel(handle C.uint64_t) (status C.int32_t) {
	defer func() {
		if r := recover(); r != nil {
			status = C.int32_t(abi.StatusUnknownHandle)
		}
	}()
	return C.int32_t(table.Cancel(uint64(handle)))
}

//export io_harness_close
func io_harness_close(harness C.uint64_t, timeoutMS C.int32_t) (status C.int32_t) {
	defer func() {
		if r := recover(); r != nil {
			status = C.int32_t(abi.StatusUnknownHandle)
		}
	}()
	return C.int32_t(table.Close(uint64(harness), time.Duration(timeoutMS)*time.Millisecond))
}
