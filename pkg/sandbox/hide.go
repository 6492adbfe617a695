package sandbox

import (
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
)

// DefaultHide returns the host paths that the backends that hide paths
// ([Enforcement.Secrets]: linux-ns and bwrap) hide from every command,
// as they exist here: the caller's home, /root and /home (whole), the
// per-user runtime directories and container secrets, the password and
// host-key files of /etc, the container engines' sockets, and the usual
// credential files inside a home, which stay hidden when part of a home
// is shown again (a ReadOnly ~/.cargo does not show
// ~/.cargo/credentials.toml). A Spec shows a path by naming it in
// ReadOnly, Writable or Workdir, and hides more with Hide.
func DefaultHide() []string {
	var homes []string
	if h, err := os.UserHomeDir(); err == nil && filepath.IsAbs(h) {
		homes = append(homes, h)
	}
	if u, err := user.LookupId(strconv.Itoa(os.Geteuid())); err == nil && filepath.IsAbs(u.HomeDir) {
		homes = append(homes, u.HomeDir)
	}
	homes = append(homes, "/root")
	candidates := []string{
		"/etc/shadow", "/etc/shadow-", "/etc/gshadow", "/etc/gshadow-", "/etc/security/opasswd",
		"/etc/ssl/private", "/etc/krb5.keytab", "/etc/sudoers", "/etc/sudoers.d",
		"/root", "/home", "/run/user", "/run/secrets", "/var/run/secrets",
		"/run/docker.sock", "/var/run/docker.sock", "/run/podman", "/run/containerd",
	}
	keys, _ := filepath.Glob("/etc/ssh/ssh_host_*_key")
	candidates = append(candidates, keys...)
	for _, h := range homes {
		candidates = append(candidates, h)
		for _, rel := range homeSecrets() {
			candidates = append(candidates, filepath.Join(h, rel))
		}
	}
	var out []string
	for _, c := range candidates {
		real, err := filepath.EvalSymlinks(c)
		if err != nil || real == "/" || slices.Contains(out, real) {
			continue
		}
		out = append(out, real)
	}
	return out
}

// homeSecrets returns where credentials live inside a home.
func homeSecrets() []string {
	return []string{
		".ssh", ".gnupg", ".aws", ".azure", ".config", ".docker", ".kube", ".netrc", ".npmrc", ".pypirc",
		".git-credentials", ".pgpass", ".my.cnf", ".vault-token", ".password-store", ".local/share/keyrings",
		".cargo/credentials", ".cargo/credentials.toml", ".m2/settings.xml", ".gradle/gradle.properties",
		".terraform.d/credentials.tfrc.json", ".bash_history", ".zsh_history", ".python_history",
	}
}
