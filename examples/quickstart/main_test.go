package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/initorigin/io-harness-go/pkg/harness/store"
	"github.com/initorigin/io-harness-go/pkg/harness/store/sqlite"
)

// The demo reaches success with no key, says so first, and its trace is
// in the SQLite file; the project's test, which failed before, passes.
func TestQuickstart(t *testing.T) {
	dir := t.TempDir()
	var out bytes.Buffer
	noEnv := func(string) (string, bool) { return "", false }
	if err := run(context.Background(), &out, noEnv, dir); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	text := out.String()
	first, _, _ := strings.Cut(text, "\n")
	if !strings.Contains(first, "scripted model") {
		t.Errorf("first line %q does not say the model is scripted", first)
	}
	for _, want := range []string{"outcome: success after 3 step(s)", "--- trace of run_", "edit_file", "verification go_test_passes: passed true"} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q:\n%s", want, text)
		}
	}

	st, err := sqlite.Open(context.Background(), filepath.Join(dir, "trace.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	runs, err := st.Runs(context.Background(), store.RunFilter{})
	if err != nil || len(runs) != 1 || runs[0].Outcome != "success" || runs[0].Steps != 3 {
		t.Fatalf("stored runs %+v, %v", runs, err)
	}

	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command on PATH: cannot run the fixed project's test")
	}
	root := filepath.Join(dir, "calc")
	test := func(dir string) error {
		cmd := exec.Command(goBin, "test", "./...")
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOPROXY=off", "GOWORK=off")
		outp, err := cmd.CombinedOutput()
		t.Logf("go test in %s:\n%s", dir, outp)
		return err
	}
	if err := test(root); err != nil {
		t.Errorf("the fixed project's tests fail: %v", err)
	}
	// The negative control: the project as shipped fails its test.
	broken := t.TempDir()
	if err := copyProject(filepath.Join(broken, "calc")); err != nil {
		t.Fatal(err)
	}
	if err := test(filepath.Join(broken, "calc")); err == nil {
		t.Error("the unfixed project passes its test; the demo proves nothing")
	}
}

// With a key in the environment the demo uses that vendor: here Anthropic's
// wire format, served by a local server (ANTHROPIC_BASE_URL) that plays a
// model which reads the code and fixes it.
func TestQuickstartWithKey(t *testing.T) {
	const key = "sk-ant-quickstart-test"
	var requests []map[string]any
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/messages" || r.Header.Get("X-Api-Key") != key || r.Header.Get("Anthropic-Version") == "" {
			http.Error(w, `{"type":"error","error":{"type":"invalid_request_error","message":"bad request"}}`, 400)
			return
		}
		var body map[string]any
		json.NewDecoder(r.Body).Decode(&body)
		requests = append(requests, body)
		turns := 0
		for _, m := range body["messages"].([]any) {
			if m.(map[string]any)["role"] == "assistant" {
				turns++
			}
		}
		call := map[int][2]string{
			0: {"read_file", `{"path":"calc.go"}`},
			1: {"edit_file", `{"path":"calc.go","old_text":"return a - b","new_text":"return a + b"}`},
		}[turns]
		partial, _ := json.Marshal(call[1])
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprintf(w, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_%d\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"claude-test\",\"content\":[],\"usage\":{\"input_tokens\":900,\"output_tokens\":1}}}\n\n", turns)
		fmt.Fprintf(w, "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"tool_use\",\"id\":\"toolu_%d\",\"name\":%q,\"input\":{}}}\n\n", turns, call[0])
		fmt.Fprintf(w, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":%s}}\n\n", partial)
		fmt.Fprint(w, "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n")
		fmt.Fprint(w, "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"tool_use\"},\"usage\":{\"output_tokens\":40}}\n\n")
		fmt.Fprint(w, "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")
	}))
	defer srv.Close()
	env := map[string]string{"ANTHROPIC_API_KEY": key, "ANTHROPIC_MODEL": "claude-test", "ANTHROPIC_BASE_URL": srv.URL}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }

	var out bytes.Buffer
	if err := run(context.Background(), &out, lookup, t.TempDir()); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	first, _, _ := strings.Cut(out.String(), "\n")
	if !strings.Contains(first, "anthropic:claude-test") {
		t.Errorf("first line %q does not name the real provider", first)
	}
	if !strings.Contains(out.String(), "outcome: success after 2 step(s)") || len(requests) != 2 {
		t.Errorf("%d requests; output:\n%s", len(requests), out.String())
	}
	if strings.Contains(out.String(), key) {
		t.Error("the key was printed")
	}

	// A key without a model is an error, not a guessed default model.
	delete(env, "ANTHROPIC_MODEL")
	if err := run(context.Background(), &out, lookup, t.TempDir()); err == nil || !strings.Contains(err.Error(), "ANTHROPIC_MODEL") {
		t.Errorf("a key without a model: %v", err)
	}
}
