//go:build unix

package mcp

import (
	"io/fs"
	"os/exec"
	"path/filepath"
	"syscall"
)

// processGroups says whether HostLauncher kills a server's children too.
const processGroups = true

func setGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}

// killGroup kills cmd's process group.
func killGroup(cmd *exec.Cmd) {
	if cmd.Process != nil {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		cmd.Process.Kill()
	}
}

func splitList(path string) []string { return filepath.SplitList(path) }

func executable(fi fs.FileInfo) bool { return fi.Mode()&0o111 != 0 }
