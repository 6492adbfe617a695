//go:build !unix

package mcp

import (
	"io/fs"
	"os/exec"
	"path/filepath"
)

// processGroups says whether HostLauncher kills a server's children too:
// here it kills the server's own process only.
const processGroups = false

func setGroup(cmd *exec.Cmd) {}

func killGroup(cmd *exec.Cmd) {
	if cmd.Process != nil {
		cmd.Process.Kill()
	}
}

func splitList(path string) []string { return filepath.SplitList(path) }

func executable(fi fs.FileInfo) bool { return true }
