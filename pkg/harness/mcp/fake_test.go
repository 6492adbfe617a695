package mcp_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"time"
)

// The fake server is this test binary run with IOH_MCP_FAKE=1: a stdio
// MCP server written by hand, line by line, so that it can misbehave in
// every way the client must survive. FAKE_START picks how it starts:
// "exit" (complains on stderr and exits 2), "silent" (never answers),
// "slow" (sleeps FAKE_DELAY first), or normal.

type fakeMsg struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   json.RawMessage `json:"error,omitempty"`
}

type fakeServer struct {
	mu      sync.Mutex
	out     *bufio.Writer
	extra   bool
	nextID  int
	waiting map[string]chan fakeMsg
}

func (f *fakeServer) send(v any) {
	b, _ := json.Marshal(v)
	f.raw(string(b))
}

func (f *fakeServer) raw(line string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.out.WriteString(line)
	f.out.WriteString("\n")
	f.out.Flush()
}

func (f *fakeServer) result(id json.RawMessage, result any) {
	f.send(map[string]any{"jsonrpc": "2.0", "id": id, "result": result})
}

func text(s string) map[string]any {
	return map[string]any{"content": []any{map[string]any{"type": "text", "text": s}}}
}

// request sends a request to the client and waits for its answer.
func (f *fakeServer) request(method string, params any) fakeMsg {
	f.mu.Lock()
	f.nextID++
	id := fmt.Sprintf(`"s%d"`, f.nextID)
	ch := make(chan fakeMsg, 1)
	f.waiting[id] = ch
	f.mu.Unlock()
	f.send(map[string]any{"jsonrpc": "2.0", "id": json.RawMessage(id), "method": method, "params": params})
	select {
	case m := <-ch:
		return m
	case <-time.After(10 * time.Second):
		return fakeMsg{Error: json.RawMessage(`"no answer"`)}
	}
}

func fakeTools(extra bool) []any {
	obj := func(props string) json.RawMessage {
		return json.RawMessage(`{"type":"object","properties":{` + props + `}}`)
	}
	yes := true
	tools := []any{
		map[string]any{"name": "echo", "description": "Echo the text.", "inputSchema": obj(`"text":{"type":"string"}`),
			"annotations": map[string]any{"readOnlyHint": yes}},
		map[string]any{"name": "crash", "description": "Exit mid-call.", "inputSchema": obj("")},
		map[string]any{"name": "hang", "description": "Never answer.", "inputSchema": obj("")},
		map[string]any{"name": "flood", "description": "Answer with a huge line.", "inputSchema": obj(`"bytes":{"type":"integer"}`)},
		map[string]any{"name": "noise", "description": "Print a debug line on stdout, then answer.", "inputSchema": obj("")},
		map[string]any{"name": "garbage", "description": "Print a non-JSON line and nothing else.", "inputSchema": obj("")},
		map[string]any{"name": "badframe", "description": "Answer with a malformed response.", "inputSchema": obj("")},
		map[string]any{"name": "wrongid", "description": "Answer another id.", "inputSchema": obj("")},
		map[string]any{"name": "dial", "description": "Connect to addr.", "inputSchema": obj(`"addr":{"type":"string"}`)},
		map[string]any{"name": "write", "description": "Write a file.", "inputSchema": obj(`"path":{"type":"string"},"content":{"type":"string"}`)},
		map[string]any{"name": "add_tool", "description": "Add a tool and say so.", "inputSchema": obj("")},
		map[string]any{"name": "elicit", "description": "Ask the user.", "inputSchema": obj("")},
		map[string]any{"name": "sample", "description": "Ask the client's model.", "inputSchema": obj("")},
		map[string]any{"name": "media", "description": "Answer with an image, a link and structured content.", "inputSchema": obj("")},
		map[string]any{"name": "fail", "description": "A tool error.", "inputSchema": obj("")},
		map[string]any{"name": "structured", "description": "Structured content only.", "inputSchema": obj("")},
		map[string]any{"name": "stderr", "description": "Write to stderr.", "inputSchema": obj(`"bytes":{"type":"integer"}`)},
		map[string]any{"name": "idem", "description": "Idempotent.", "inputSchema": obj(""),
			"annotations": map[string]any{"idempotentHint": yes}},
	}
	if os.Getenv("FAKE_NAMES") != "" {
		tools = append(tools,
			map[string]any{"name": "echo", "description": "a duplicate", "inputSchema": obj("")},
			map[string]any{"name": "weird.name/x", "description": "dots and slashes", "inputSchema": obj("")},
			map[string]any{"name": "weird_name_x", "description": "its look-alike", "inputSchema": obj("")},
			map[string]any{"name": strings.Repeat("long", 20), "description": "80 bytes", "inputSchema": obj("")},
			map[string]any{"name": "write_file", "description": "a built-in's name", "inputSchema": obj("")})
	}
	if extra {
		tools = append(tools, map[string]any{"name": "late", "description": "Added later.", "inputSchema": obj("")})
	}
	return tools
}

func runFakeServer() {
	switch os.Getenv("FAKE_START") {
	case "exit":
		fmt.Fprintln(os.Stderr, "fatal: the configuration file /etc/fake.conf is missing")
		os.Exit(2)
	case "silent":
		fmt.Fprintln(os.Stderr, "starting, slowly")
		select {}
	case "slow":
		d, _ := time.ParseDuration(os.Getenv("FAKE_DELAY"))
		time.Sleep(d)
	}
	fmt.Fprintln(os.Stderr, "fake server ready")
	f := &fakeServer{out: bufio.NewWriter(os.Stdout), waiting: map[string]chan fakeMsg{}}
	in := bufio.NewReader(os.Stdin)
	for {
		line, err := in.ReadString('\n')
		if err != nil {
			os.Exit(0)
		}
		var m fakeMsg
		if json.Unmarshal([]byte(line), &m) != nil {
			continue
		}
		if m.Method == "" {
			f.mu.Lock()
			ch := f.waiting[string(m.ID)]
			f.mu.Unlock()
			if ch != nil {
				ch <- m
			}
			continue
		}
		if len(m.ID) == 0 {
			continue // a notification
		}
		go f.handle(m)
	}
}

func (f *fakeServer) handle(m fakeMsg) {
	switch m.Method {
	case "initialize":
		f.result(m.ID, map[string]any{"protocolVersion": "2025-11-25",
			"capabilities": map[string]any{"tools": map[string]any{"listChanged": true}},
			"serverInfo":   map[string]any{"name": "fake", "version": "1"}})
	case "ping":
		f.result(m.ID, map[string]any{})
	case "tools/list":
		f.mu.Lock()
		extra := f.extra
		f.mu.Unlock()
		f.result(m.ID, map[string]any{"tools": fakeTools(extra)})
	case "tools/call":
		var p struct {
			Name      string         `json:"name"`
			Arguments map[string]any `json:"arguments"`
		}
		json.Unmarshal(m.Params, &p)
		f.call(m.ID, p.Name, p.Arguments)
	default:
		f.send(map[string]any{"jsonrpc": "2.0", "id": m.ID, "error": map[string]any{"code": -32601, "message": "method not found"}})
	}
}

func (f *fakeServer) call(id json.RawMessage, name string, args map[string]any) {
	str := func(k string) string { s, _ := args[k].(string); return s }
	num := func(k string) int { n, _ := args[k].(float64); return int(n) }
	switch name {
	case "echo", "idem":
		f.result(id, text("echo: "+str("text")))
	case "crash":
		fmt.Fprintln(os.Stderr, "panic: crash requested by the test")
		os.Exit(3)
	case "hang":
	case "flood":
		f.result(id, text(strings.Repeat("x", num("bytes"))))
	case "noise":
		f.raw("DEBUG: a log line on stdout")
		f.result(id, text("answered after the noise"))
	case "garbage":
		f.raw("this is not JSON at all {")
	case "badframe":
		f.send(map[string]any{"jsonrpc": "2.0", "id": id})
	case "wrongid":
		f.send(map[string]any{"jsonrpc": "2.0", "id": 987654, "result": text("for nobody")})
	case "dial":
		c, err := net.DialTimeout("tcp", str("addr"), 3*time.Second)
		if err != nil {
			f.result(id, map[string]any{"content": []any{map[string]any{"type": "text", "text": "dial failed: " + err.Error()}}, "isError": true})
			return
		}
		buf := make([]byte, 64)
		n, _ := c.Read(buf)
		c.Close()
		f.result(id, text("connected: "+string(buf[:n])))
	case "write":
		if err := os.WriteFile(str("path"), []byte(str("content")), 0o644); err != nil {
			f.result(id, map[string]any{"content": []any{map[string]any{"type": "text", "text": "write failed: " + err.Error()}}, "isError": true})
			return
		}
		f.result(id, text("wrote "+str("path")))
	case "add_tool":
		f.mu.Lock()
		f.extra = true
		f.mu.Unlock()
		f.send(map[string]any{"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
		f.result(id, text("added"))
	case "elicit":
		a := f.request("elicitation/create", map[string]any{"mode": "form", "message": "What is your name?",
			"requestedSchema": map[string]any{"type": "object", "properties": map[string]any{"name": map[string]any{"type": "string"}}}})
		f.result(id, text(fmt.Sprintf("result=%s error=%s", a.Result, a.Error)))
	case "sample":
		a := f.request("sampling/createMessage", map[string]any{"messages": []any{map[string]any{"role": "user",
			"content": map[string]any{"type": "text", "text": "hi"}}}, "maxTokens": 10})
		f.result(id, text(fmt.Sprintf("result=%s error=%s", a.Result, a.Error)))
	case "media":
		f.result(id, map[string]any{"content": []any{
			map[string]any{"type": "text", "text": "a picture:"},
			map[string]any{"type": "image", "mimeType": "image/png", "data": onePixelPNG},
			map[string]any{"type": "image", "mimeType": "image/svg+xml", "data": "PHN2Zz48L3N2Zz4="},
			map[string]any{"type": "resource_link", "uri": "file:///doc.txt", "name": "doc", "mimeType": "text/plain", "description": "a document"},
			map[string]any{"type": "resource", "resource": map[string]any{"uri": "mem://note", "mimeType": "text/plain", "text": "embedded note"}},
		}, "structuredContent": map[string]any{"width": 1, "height": 1}})
	case "structured":
		f.result(id, map[string]any{"content": []any{}, "structuredContent": map[string]any{"width": 1, "height": 1}})
	case "fail":
		f.result(id, map[string]any{"content": []any{map[string]any{"type": "text", "text": "it went wrong"}}, "isError": true})
	case "stderr":
		n := num("bytes")
		line := strings.Repeat("e", 99) + "\n"
		for i := 0; i < n; i += len(line) {
			os.Stderr.WriteString(line)
		}
		f.result(id, text("wrote stderr"))
	default:
		f.send(map[string]any{"jsonrpc": "2.0", "id": id, "error": map[string]any{"code": -32602, "message": "unknown tool " + name}})
	}
}

// onePixelPNG is a 1×1 PNG in base64.
const onePixelPNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
