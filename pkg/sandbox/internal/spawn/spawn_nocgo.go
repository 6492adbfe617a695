//go:build !(linux && cgo)

package spawn

import "errors"

// InProcess reports whether the spawner is compiled into this binary.
const InProcess = false

// Spawn is unavailable without cgo on Linux; use the helper executable.
func Spawn(r *Request, stdin, stdout, stderr int) (Child, error) {
	return Child{}, errors.ErrUnsupported
}
