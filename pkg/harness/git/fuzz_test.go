package git

import (
	"strings"
	"testing"
)

// The config reader never panics, and whatever it carries is on the
// allow-list and holds a value its check accepts.
func FuzzReadConfig(f *testing.F) {
	for _, s := range []string{
		"[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n",
		"[core]\n\tfsmonitor = \"sh -c \\\"x\\\"\" ; c\n[filter \"a b\"]\n\tclean = x\\\n y\n",
		"[branch.main]\nremote=origin\n[extensions]objectformat=sha256\n",
		"\ufeff# c\n[core] bare\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		kvs, err := readConfig(data)
		if err != nil {
			return
		}
		for _, kv := range kvs {
			check, ok := carried(kv.key)
			if !ok || !check(kv.value) {
				t.Fatalf("carried %q = %q", kv.key, kv.value)
			}
			if strings.ContainsAny(kv.value, "\n\x00") {
				t.Fatalf("a carried value holds a newline or NUL: %q", kv.value)
			}
		}
		if conf, err := shadowConfig(kvs); err == nil && strings.Count(conf, "[") > 2 {
			t.Fatalf("the shadow config grew a section: %q", conf)
		}
	})
}

// A revision or branch name that passes its check can never be read by
// git as an option, a range, a path or a reflog entry.
func FuzzCheckRev(f *testing.F) {
	for _, s := range []string{"HEAD", "HEAD~2^1", "main", "v1.0", "abc1234", "-x", "a..b", "HEAD:x", "@{-1}", "a/.b", "x.lock"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if checkRev(s) == nil {
			if strings.HasPrefix(s, "-") || strings.Contains(s, "..") || strings.ContainsAny(s, ": \t\n\x00\\?*[") || strings.Contains(s, "@{") {
				t.Fatalf("checkRev accepted %q", s)
			}
		}
		if checkBranch(s) == nil {
			if strings.HasPrefix(s, "-") || strings.ContainsAny(s, "~^:") || s == "HEAD" || strings.HasSuffix(s, ".lock") {
				t.Fatalf("checkBranch accepted %q", s)
			}
		}
	})
}
