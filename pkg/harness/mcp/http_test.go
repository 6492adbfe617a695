package mcp_test

import (
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/initorigin/io-harness-go/pkg/harness/mcp"
)

// minimalHTTP serves the least of streamable HTTP MCP: JSON answers to
// POSTs, and the standalone GET stream answered with get's status.
func minimalHTTP(t *testing.T, get int, gets *atomic.Int32, big int) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			gets.Add(1)
			w.WriteHeader(get)
			return
		}
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		json.NewDecoder(r.Body).Decode(&m)
		if len(m.ID) == 0 {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		var result any
		switch m.Method {
		case "initialize":
			result = map[string]any{"protocolVersion": "2025-11-25", "capabilities": map[string]any{"tools": map[string]any{}},
				"serverInfo": map[string]any{"name": "min", "version": "1"}}
		case "tools/list":
			result = map[string]any{"tools": []any{map[string]any{"name": "big", "inputSchema": map[string]any{"type": "object"}}}}
		case "tools/call":
			result = map[string]any{"content": []any{map[string]any{"type": "text", "text": strings.Repeat("z", big)}}}
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": m.ID, "result": result})
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

// TestGETStreamBounded: a server whose standalone GET stream keeps
// failing is not retried every second forever (research bug M2): after
// three failures in a row the client stops asking.
func TestGETStreamBounded(t *testing.T) {
	var gets atomic.Int32
	addr := minimalHTTP(t, http.StatusInternalServerError, &gets, 10)
	connect(t, mcp.Options{Servers: []mcp.Server{{Name: "min", URL: "http://" + addr + "/mcp"}}, Gate: gate(allowNet(addr))})
	if !waitFor(30*time.Second, func() bool { return gets.Load() >= 3 }) {
		t.Fatalf("only %d GETs: the stream was never retried", gets.Load())
	}
	time.Sleep(3 * time.Second) // the SDK retries every second
	if n := gets.Load(); n != 3 {
		t.Errorf("%d GETs; want the stream given up after 3", n)
	}
}

// TestHTTPOutputCap: an HTTP answer over max_output fails the call with
// the cap named; one within it is fine.
func TestHTTPOutputCap(t *testing.T) {
	var gets atomic.Int32
	for _, big := range []int{1000, 100000} {
		addr := minimalHTTP(t, http.StatusMethodNotAllowed, &gets, big)
		c := connect(t, mcp.Options{Servers: []mcp.Server{{Name: "min", URL: "http://" + addr + "/mcp", MaxOutput: 64 << 10}}, Gate: gate(allowNet(addr))})
		r := call(t, find(t, c, "mcp__min__big"), `{}`)
		if big < 64<<10 {
			if r.IsError || len(r.Output) != big {
				t.Errorf("a %d-byte answer: %d bytes, %v", big, len(r.Output), r.IsError)
			}
			continue
		}
		if !r.IsError || !strings.Contains(r.Output, "over the 65536-byte output cap (max_output)") {
			t.Errorf("a %d-byte answer: %q", big, r.Output)
		}
	}
}
