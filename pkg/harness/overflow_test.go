package harness_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/initorigin/io-harness-go/pkg/harness"
	"github.com/initorigin/io-harness-go/pkg/harness/provider/openai"
	"github.com/initorigin/io-harness-go/pkg/harness/verify"
)

// windowServer is an OpenAI-compatible chat endpoint with a context
// window: a request whose messages pass window tokens (o200k_base) is
// refused with OpenAI's own context-length error, and any other gets the
// next of turns.
type windowServer struct {
	window int64
	turns  []string
	count  tokenCounter

	mu      sync.Mutex
	bodies  [][]byte
	refused int
	served  int
}

func (s *windowServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var req struct {
		Messages json.RawMessage `json:"messages"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	n := s.count.text(string(req.Messages))
	s.mu.Lock()
	defer s.mu.Unlock()
	s.bodies = append(s.bodies, body)
	if n > s.window {
		s.refused++
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprintf(w, `{"error": {"message": "This model's maximum context length is %d tokens. However, your messages resulted in %d tokens. Please reduce the length of the messages.", "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"}}`, s.window, n)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	if s.served < len(s.turns) {
		fmt.Fprint(w, s.turns[s.served])
	}
	s.served++
}

// runAt drives task against a server that speaks OpenAI's API with a
// model the catalogue does not know, so the harness knows no window and
// learns of it only from the refusal.
func runAt(t *testing.T, srv *windowServer, task harness.TaskContract, edit ...func(*harness.Options)) harness.Outcome {
	t.Helper()
	hs := httptest.NewServer(srv)
	defer hs.Close()
	p, err := openai.NewCompatible(openai.Config{Model: "local-model", BaseURL: hs.URL + "/v1"})
	if err != nil {
		t.Fatal(err)
	}
	task.Budgets.MaxRetries = intp(0)
	opts := harness.Options{Provider: p, Store: memStore(t), DigestFolds: true}
	for _, e := range edit {
		e(&opts)
	}
	res, err := harness.Run(context.Background(), task, opts)
	if err != nil {
		t.Fatal(err)
	}
	return res.Outcome
}

// A context-length error on a request with nothing to fold ends the run
// with the overflow named, after one request: folding cannot make it
// shorter, and the same request would only be refused again. The
// negative control asks again regardless, as the loop did: the second
// request is byte-identical to the first. The control is a history that
// can fold: the refused request is asked again shorter, and the run goes
// on.
func TestOverflowAsksAgainOnlyShorter(t *testing.T) {
	goal := "Summarise this text: " + strings.Repeat("the quick brown fox jumps over the lazy dog. ", 400)
	task := harness.TaskContract{Goal: goal, Root: workspace(t, nil)}
	newServer := func() *windowServer {
		return &windowServer{window: 2000, count: tiktokenCounter(t), turns: []string{chatDone}}
	}

	srv := newServer()
	out := runAt(t, srv, task)
	if len(srv.bodies) != 1 || out.Kind != harness.Escalated || !strings.Contains(out.Reason, "context_overflow") ||
		!strings.Contains(out.Reason, "maximum context length is 2000 tokens") || !strings.Contains(out.Reason, "not sent again") {
		t.Fatalf("%d requests; outcome %s: %s", len(srv.bodies), out.Kind, out.Reason)
	}
	t.Logf("one request; %s", out.Reason)

	t.Run("negative control: ask again unchanged", func(t *testing.T) {
		srv := newServer()
		out := runAt(t, srv, task, harness.RetryUnchangedAfterOverflow)
		if len(srv.bodies) != 2 || !bytes.Equal(srv.bodies[0], srv.bodies[1]) || out.Kind != harness.Escalated {
			t.Fatalf("%d requests (the same twice: %v); outcome %s: %s", len(srv.bodies), len(srv.bodies) == 2 && bytes.Equal(srv.bodies[0], srv.bodies[1]), out.Kind, out.Reason)
		}
		t.Logf("two requests of %d and %d bytes, byte-identical, both refused", len(srv.bodies[0]), len(srv.bodies[1]))
	})

	t.Run("control: a history that folds", func(t *testing.T) {
		files := map[string]string{}
		var turns []string
		for i := range 8 {
			name := fmt.Sprintf("part%d.txt", i+1)
			files[name] = strings.Repeat(fmt.Sprintf("line of %s: the quick brown fox jumps over the lazy dog\n", name), 60)
			turns = append(turns, chatCall(fmt.Sprintf("call_%d", i+1), "read_file", fmt.Sprintf(`{"path": %q}`, name)))
		}
		turns = append(turns, chatCall("call_9", "write_file", `{"path": "done.txt", "content": "done"}`))
		srv := &windowServer{window: 5000, count: tiktokenCounter(t), turns: turns}
		task := harness.TaskContract{Goal: "Read the parts, then write done.txt.", Root: workspace(t, files),
			Verification: []verify.Check{contains("done.txt", "done")}}
		out := runAt(t, srv, task)
		if out.Kind != harness.Success || srv.refused == 0 || len(srv.bodies) != len(turns)+srv.refused {
			t.Fatalf("outcome %s (%s); %d requests, %d refused, %d turns", out.Kind, out.Reason, len(srv.bodies), srv.refused, len(turns))
		}
		for i := range len(srv.bodies) - 1 {
			if srv.over(i) && len(srv.bodies[i+1]) >= len(srv.bodies[i]) {
				t.Errorf("request %d was refused and request %d is no shorter (%d bytes, then %d)", i+1, i+2, len(srv.bodies[i]), len(srv.bodies[i+1]))
			}
		}
		t.Logf("%d requests, %d refused and each asked again shorter", len(srv.bodies), srv.refused)
	})
}

// over reports whether the server's i-th request passed its window.
func (s *windowServer) over(i int) bool {
	var req struct {
		Messages json.RawMessage `json:"messages"`
	}
	json.Unmarshal(s.bodies[i], &req)
	return s.count.text(string(req.Messages)) > s.window
}
