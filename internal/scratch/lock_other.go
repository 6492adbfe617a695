//go:build !unix

package scratch

import (
	"errors"
	"os"
)

// lock holds nothing where there is no flock; a sweep then removes
// nothing, since it cannot tell a live process's directory from a dead
// one's.
func lock(f *os.File, hold bool) error {
	if hold {
		return nil
	}
	return errors.ErrUnsupported
}
