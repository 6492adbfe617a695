// Command cshared is a test fixture: package sandbox built as a C shared
// library (-buildmode=c-shared) with one export, so that a test can load
// it into Python and run a sandboxed command from there.
package main

// #include <stdlib.h>
import "C"

import (
	"context"
	"encoding/json"
	"unsafe"

	"github.com/initorigin/io-harness-go/pkg/sandbox"
)

// reply is what RunJSON returns.
type reply struct {
	Result *sandbox.Result `json:"result,omitempty"`
	Error  string          `json:"error,omitempty"`
}

// RunJSON runs the JSON spec in the strongest sandbox available and
// returns the JSON result. The caller frees the string with FreeString.
//
//export RunJSON
func RunJSON(spec *C.char) *C.char {
	var r reply
	var s sandbox.Spec
	if err := json.Unmarshal([]byte(C.GoString(spec)), &s); err != nil {
		r.Error = err.Error()
	} else if sb, err := sandbox.New(context.Background(), nil); err != nil {
		r.Error = err.Error()
	} else if r.Result, err = sb.Run(context.Background(), &s); err != nil {
		r.Error = err.Error()
	}
	out, _ := json.Marshal(r)
	return C.CString(string(out))
}

// FreeString frees a string RunJSON returned.
//
//export FreeString
func FreeString(s *C.char) { C.free(unsafe.Pointer(s)) }

func main() {}
