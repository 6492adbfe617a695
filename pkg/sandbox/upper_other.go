//go:build !linux

package sandbox

import (
	"errors"
	"os"
)

var errNoUpper = errors.New("sandbox: no upper layer on this system")

// Walk calls fn for each change of the layer; see the Linux build.
func (u *Upper) Walk(fn func(Change) error) error { return errNoUpper }

// Open opens a changed regular file of the layer; see the Linux build.
func (u *Upper) Open(path string) (*os.File, error) { return nil, errNoUpper }
