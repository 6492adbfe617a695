package main

import (
	"crypto/sha256"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The store the previous release's CLI wrote (schema version 3; see
// pkg/harness/store/sqlite/testdata/v3/README.md), and its two runs.
const (
	olderStore    = "../../pkg/harness/store/sqlite/testdata/v3.db"
	olderFinished = "run_01a250c716b0dfe24392e8"
	olderPaused   = "run_01a250c716c1e54dd04984"
	olderRequest  = "apr_2bd1ddd11802ec4b97d8"
)

// runs, trace and store check read a store the previous release wrote,
// all of it, and leave the file as it was — its bytes and its mtime — so
// that the previous release still opens it.
func TestTraceAndRunsOfAnOlderStore(t *testing.T) {
	data, err := os.ReadFile(olderStore)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "v3.db")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	past := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
	if err := os.Chtimes(path, past, past); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"runs", "--store", path}, []string{olderFinished + "  finished  success", olderPaused + "  paused    awaiting_approval"}},
		{[]string{"runs", "--store", path, "--all", "--json"}, []string{`"id": "` + olderFinished, `"status": "paused"`}},
		{[]string{"trace", "--store", path, olderFinished}, []string{"step 2", "write_file", "outcome: success"}},
		{[]string{"trace", "--store", path, "--json", olderPaused}, []string{`"request_id": "` + olderRequest, "awaiting_approval"}},
		{[]string{"trace", "--store", path, "--html", "-", olderFinished}, []string{"<html", olderFinished}},
		{[]string{"store", "check", path}, []string{"(schema 3)", "integrity: ok", "1 paused, 1 finished"}},
	} {
		r := cli(t, dir, "", tc.args...)
		if r.code != exitOK {
			t.Errorf("%s: %s", strings.Join(tc.args, " "), r)
			continue
		}
		for _, want := range tc.want {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("%s: the output lacks %q:\n%s", strings.Join(tc.args, " "), want, r.stdout)
			}
		}
	}
	after, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if sha256.Sum256(after) != sha256.Sum256(data) || !fi.ModTime().Equal(past) {
		t.Errorf("reading the older store changed it: %d -> %d bytes, mtime %s -> %s", len(data), len(after),
			past.Format(time.RFC3339), fi.ModTime().Format(time.RFC3339))
	}
}
