// Package git is the harness's git tools: git_status, git_diff, git_log,
// git_show, git_add, git_commit and git_branch. The harness builds every
// argv (paths are literal pathspecs after --, revisions and branch names
// are checked and come after --end-of-options, messages go on stdin), and
// git runs in the run's sandbox on the workspace, never on the host.
//
// A repository is untrusted. Git never reads its config, hooks or
// attributes file: it runs on a shadow git directory made for each call,
// whose config is the harness's (every key that can name a program set to
// run none) plus a short allow-list of data keys read from the
// repository's config by the harness itself; its objects, refs, logs and
// index are the repository's own. Nothing pushes, fetches or rewrites
// history: there is no tool for it.
//
// The permission boundary judges what the tools show and change. What
// they show is filtered by the read policy, as a walk is: a path the read
// policy does not allow outright is not listed, and its content is never
// diffed or shown. What they change is judged as the exec of the git
// command the harness runs, the one action a person approves (git add
// -- a.go b.go; git commit -m msg; git switch topic), with floors under
// it: a path is staged only if the read policy shows it and the write
// policy does not deny it, a commit only takes staged paths the write
// policy does not deny, and a switch only rewrites files the write policy
// allows outright.
package git

import (
	"fmt"
	"strings"

	"github.com/initorigin/io-harness-go/pkg/harness/tool"
)

// Config configures the git tools of a run.
type Config struct {
	// Name and Email are the identity every commit is made with, as
	// author and committer.
	Name  string `json:"name"`
	Email string `json:"email"`
}

// ConfigError is a Config that is not valid. Field is "name" or "email".
type ConfigError struct {
	Field  string
	Reason string
}

// Error implements error.
func (e *ConfigError) Error() string { return "git: " + e.Field + ": " + e.Reason }

// Validate checks the identity: both fields set, at most 256 bytes, with
// no control character and none of the <> that delimit an email in a
// commit.
func (c Config) Validate() error {
	for _, f := range []struct{ name, v string }{{"name", c.Name}, {"email", c.Email}} {
		switch {
		case strings.TrimSpace(f.v) == "":
			return &ConfigError{f.name, "required: the identity commits are made with"}
		case len(f.v) > 256:
			return &ConfigError{f.name, "over 256 bytes"}
		case strings.ContainsAny(f.v, "<>"):
			return &ConfigError{f.name, "contains < or >"}
		}
		for _, r := range f.v {
			if r < 0x20 || r == 0x7f {
				return &ConfigError{f.name, "contains a control character"}
			}
		}
	}
	return nil
}

// Tools returns the git tools, in this order: git_status, git_diff,
// git_log, git_show, git_add, git_commit and git_branch. c must be valid.
func Tools(c Config) []tool.Tool {
	return []tool.Tool{status{c}, diff{c}, logTool{c}, show{c}, add{c}, commit{c}, branch{c}}
}

// Output sizes.
const (
	// listOut is what git may print for a list (status, names).
	listOut = 8 << 20
	// patchOut is what git may print for a patch; past it git is
	// stopped and the patch reported cut.
	patchOut = 2 << 20
	// maxPatchPaths bounds the paths a patch is asked for by name.
	maxPatchPaths = 1000
)

// checkPaths checks the path arguments: each a clean workspace path,
// none inside .git.
func checkPaths(field string, paths []string) ([]string, *tool.Result) {
	out := make([]string, 0, len(paths))
	for i, p := range paths {
		clean, reason := tool.CleanPath(p)
		if reason == "" && tool.InGitDir(clean) {
			reason = "path is inside the .git directory"
		}
		if reason != "" {
			r := tool.BadArgs(tool.ArgError(fmt.Sprintf("%s[%d]", field, i), fmt.Sprintf("%q: %s", p, reason)))
			return nil, &r
		}
		out = append(out, clean)
	}
	return out, nil
}

// plural returns "1 file" or "2 files".
func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}
