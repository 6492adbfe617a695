package main

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
)

// trace --html writes one page of the run; - writes it to stdout.
func TestTraceHTML(t *testing.T) {
	dir := t.TempDir()
	spec := writeFixture(t, dir, "success")
	r := cli(t, dir, "", "run", spec)
	m := regexp.MustCompile(`run (run_[0-9a-f]+)`).FindStringSubmatch(r.stdout)
	if r.code != exitOK || m == nil {
		t.Fatalf("%s", r)
	}
	out := filepath.Join(dir, "trace.html")
	h := cli(t, dir, "", "trace", "--html", out, m[1])
	if h.code != exitOK || !strings.Contains(h.stderr, "wrote "+out) {
		t.Fatalf("%s", h)
	}
	page, err := os.ReadFile(out)
	if err != nil || !strings.Contains(string(page), m[1]) || !strings.Contains(string(page), "Content-Security-Policy") {
		t.Fatalf("the page: %v %d bytes", err, len(page))
	}
	if s := cli(t, dir, "", "trace", "--html", "-", m[1]); s.code != exitOK || !strings.HasPrefix(s.stdout, "<!DOCTYPE html>") {
		t.Errorf("--html -: %s", s.String()[:200])
	}
	if u := cli(t, dir, "", "trace", "--html", out, "--json", m[1]); u.code != exitUsage {
		t.Errorf("--html and --json: %s", u)
	}
	if n := cli(t, dir, "", "trace", "--html", out, "run_nope"); n.code != exitError {
		t.Errorf("an unknown run: %s", n)
	}
}

// ui serves the store on a loopback port, refuses other hosts and
// addresses, and stops on SIGINT.
func TestUI(t *testing.T) {
	dir := t.TempDir()
	spec := writeFixture(t, dir, "success")
	r := cli(t, dir, "", "run", spec)
	runID := regexp.MustCompile(`run (run_[0-9a-f]+)`).FindStringSubmatch(r.stdout)[1]
	if u := cli(t, dir, "", "ui", "--addr", "0.0.0.0:0"); u.code != exitUsage || !strings.Contains(u.stderr, "not a loopback address") {
		t.Errorf("a public address: %s", u)
	}
	p := start(t, dir, nil, bin, "ui")
	base := p.waitLine(t, regexp.MustCompile(`^serving io-harness.db at (http://127\.0\.0\.1:\d+/)`))[1]
	get := func(path, host string) (int, string) {
		req, _ := http.NewRequest(http.MethodGet, base+path, nil)
		if host != "" {
			req.Host = host
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	if code, body := get("", ""); code != http.StatusOK || !strings.Contains(body, runID) {
		t.Errorf("the index: %d", code)
	}
	if code, body := get("runs/"+runID, ""); code != http.StatusOK || !strings.Contains(body, `data-live="true"`) {
		t.Errorf("the run's page: %d", code)
	}
	if code, body := get("runs/"+runID, "rebound.example"); code != http.StatusForbidden || strings.Contains(body, runID) {
		t.Errorf("a foreign host: %d", code)
	}
	p.cmd.Process.Signal(syscall.SIGINT)
	if code := p.wait(t); code != exitOK {
		t.Errorf("ui exited %d after SIGINT", code)
	}
}
