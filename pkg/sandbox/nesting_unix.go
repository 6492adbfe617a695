//go:build unix

package sandbox

import (
	"fmt"
	"path/filepath"
	"strings"
)

// checkNesting refuses a read-only path inside a writable one where only
// Landlock confines: its rules add up, so the inner path would stay
// writable.
func checkNesting(p *plan) error {
	outer := append([]string{p.Workdir}, p.Writable...)
	for _, ro := range p.ReadOnly {
		for _, w := range outer {
			if w != "" && (ro == w || isBeneath(ro, w)) {
				return fmt.Errorf("%s is inside the writable %s; Landlock cannot make it read-only", ro, w)
			}
		}
	}
	return nil
}

func isBeneath(path, dir string) bool {
	rel, err := filepath.Rel(dir, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}
