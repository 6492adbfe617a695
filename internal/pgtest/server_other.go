//go:build !unix

package pgtest

import (
	"fmt"
	"runtime"
)

func (s *Server) boot() error {
	return fmt.Errorf("the test server runs on Unix only, not %s", runtime.GOOS)
}

// Stop does nothing here.
func (s *Server) Stop() {}
