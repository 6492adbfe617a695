package wire_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/initorigin/io-harness-go/pkg/harness/provider"
	"github.com/initorigin/io-harness-go/pkg/harness/provider/anthropic"
	"github.com/initorigin/io-harness-go/pkg/harness/provider/internal/wire"
	"github.com/initorigin/io-harness-go/pkg/harness/provider/internal/wiretest"
	"github.com/initorigin/io-harness-go/pkg/harness/provider/openai"
	"github.com/initorigin/io-harness-go/pkg/harness/provider/openrouter"
)

// otherKey is the key of a client that does not know the key a server
// echoes: the negative control, under which every path must show the
// echoed text in its error.
const otherKey = "sk-other-ffffffffffffffffffffffff"

// lab serves whatever reply the current attempt sets: an HTTP server for
// the vendors, and a raw TCP one whose first line is the reply's text,
// for the errors Go's HTTP client makes of what a server sent.
type lab struct {
	mu    sync.Mutex // guards reply and raw
	reply wiretest.Reply
	raw   string
	web   *wiretest.Server
	tcp   net.Listener
}

func newLab(tb testing.TB) *lab {
	l := &lab{}
	l.web = wiretest.NewServer(tb)
	l.web.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		l.mu.Lock()
		reply := l.reply
		l.mu.Unlock()
		for k, v := range reply.Header {
			w.Header()[k] = []string{v} // as is: the attacker's header
		}
		status := reply.Status
		if status == 0 {
			status = http.StatusOK
		}
		w.WriteHeader(status)
		if reply.Fault.OneByte {
			for i := range reply.Body {
				w.Write(reply.Body[i : i+1])
				w.(http.Flusher).Flush()
			}
			return
		}
		w.Write(reply.Body)
	})
	var err error
	l.tcp, err = net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { l.tcp.Close() })
	go func() {
		for {
			c, err := l.tcp.Accept()
			if err != nil {
				return
			}
			l.mu.Lock()
			raw := l.raw
			l.mu.Unlock()
			go func() {
				defer c.Close()
				c.SetDeadline(time.Now().Add(10 * time.Second))
				http.ReadRequest(bufio.NewReader(c))
				c.Write([]byte(raw))
			}()
		}
	}()
	return l
}

func (l *lab) set(r wiretest.Reply, raw string) {
	l.mu.Lock()
	l.reply, l.raw = r, raw
	l.mu.Unlock()
}

// path carries text from a server into an error. It returns the error of
// a client that holds secret.
type path struct {
	name string
	run  func(l *lab, text, secret string) error
}

// oneWord returns text with its spaces and colons made underscores.
func oneWord(text string) string {
	return strings.NewReplacer(" ", "_", ":", "_").Replace(text)
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func compatible(url, secret string) provider.Provider {
	c, err := openai.NewCompatible(openai.Config{APIKey: provider.Secret(secret), Model: "m", BaseURL: url + "/v1", StallTimeout: 10 * time.Second})
	if err != nil {
		panic(err)
	}
	return c
}

func complete(p provider.Provider) error {
	_, err := p.Complete(context.Background(), &provider.Request{}, nil)
	return err
}

// paths are the ways provider text reaches an error, each with the text
// where a server puts it.
func paths() []path {
	sse := func(body string, oneByte bool) wiretest.Reply {
		r := wiretest.SSE(body)
		r.Fault.OneByte = oneByte
		return r
	}
	chat := func(body func(text string) string, oneByte bool) func(l *lab, text, secret string) error {
		return func(l *lab, text, secret string) error {
			l.set(sse(body(text), oneByte), "")
			return complete(compatible(l.web.URL, secret))
		}
	}
	llamaLine := func(text string) string { return "error: " + text + "\n\ndata: [DONE]\n\n" }
	return []path{
		{"llama.cpp error line", chat(llamaLine, false)},
		{"llama.cpp error line, one byte per write", chat(llamaLine, true)},
		{"llama.cpp error object", chat(func(text string) string {
			return `error: {"code":500,"message":` + jsonString(text) + `,"type":` + jsonString(text) + "}\n\ndata: [DONE]\n\n"
		}, false)},
		{"error chunk", chat(func(text string) string {
			return `data: {"error":{"message":` + jsonString(text) + `,"type":"server_error","code":` + jsonString(text) + "}}\n\n"
		}, false)},
		{"OpenRouter error chunk", func(l *lab, text, secret string) error {
			l.set(sse(`data: {"id":"gen-1","error":{"code":502,"message":`+jsonString(text)+`,"metadata":{"error_type":`+jsonString(text)+`}},"choices":[{"index":0,"delta":{"content":""},"finish_reason":"error"}]}`+"\n\n", false), "")
			c, err := openrouter.New(openrouter.Config{APIKey: provider.Secret(secret), Model: "m", BaseURL: l.web.URL})
			if err != nil {
				panic(err)
			}
			return complete(c)
		}},
		{"Anthropic error event", func(l *lab, text, secret string) error {
			l.set(sse("event: error\ndata: "+`{"type":"error","error":{"type":"overloaded_error","message":`+jsonString(text)+"}}\n\n", false), "")
			c, err := anthropic.New(anthropic.Config{APIKey: provider.Secret(secret), Model: "m", BaseURL: l.web.URL})
			if err != nil {
				panic(err)
			}
			return complete(c)
		}},
		{"HTTP error body", func(l *lab, text, secret string) error {
			l.set(wiretest.JSON(401, `{"error":{"message":`+jsonString(text)+`,"type":"invalid_request_error","code":"invalid_api_key"}}`), "")
			return complete(compatible(l.web.URL, secret))
		}},
		{"HTTP 200 error body", func(l *lab, text, secret string) error {
			l.set(wiretest.JSON(200, `{"error":`+jsonString(text)+`}`), "")
			return complete(compatible(l.web.URL, secret))
		}},
		{"content type", func(l *lab, text, secret string) error {
			l.set(wiretest.Reply{Header: map[string]string{"Content-Type": "text/" + text}, Body: []byte("x")}, "")
			return complete(compatible(l.web.URL, secret))
		}},
		{"redirect host", func(l *lab, text, secret string) error {
			l.set(wiretest.Reply{Status: http.StatusTemporaryRedirect, Header: map[string]string{"Location": "https://" + text + ".example/v1"}}, "")
			return complete(compatible(l.web.URL, secret))
		}},
		// Go quotes one word of a bad status line, and a whole header
		// line that has no colon.
		{"transport error: status line", func(l *lab, text, secret string) error {
			l.set(wiretest.Reply{}, oneWord(text)+"\r\n\r\n")
			return complete(compatible("http://"+l.tcp.Addr().String(), secret))
		}},
		{"transport error: header line", func(l *lab, text, secret string) error {
			l.set(wiretest.Reply{}, "HTTP/1.1 200 OK\r\n"+oneWord(text)+"\r\n\r\n")
			return complete(compatible("http://"+l.tcp.Addr().String(), secret))
		}},
	}
}

// TestNoKeyInErrors echoes the key, and pieces of it, on every path
// provider text takes into an error. No run of MinSecretRun of its
// characters may survive in the error's text; and, as the negative
// control, a client that does not know the key must show it, so that
// each path is seen to carry the text.
func TestNoKeyInErrors(t *testing.T) {
	l := newLab(t)
	texts := map[string]string{
		"the whole key":          "Invalid API key: " + key62 + " (check your settings)",
		"the key past 200 bytes": strings.Repeat("m", 155) + key62 + " was rejected",
		"a prefix of 45":         "key " + key62[:45] + "...",
		"the key in two pieces":  key62[:31] + "|" + key62[31:],
	}
	for _, p := range paths() {
		for tname, text := range texts {
			t.Run(p.name+"/"+tname, func(t *testing.T) {
				err := p.run(l, text, key62)
				if provider.AsError(err) == nil {
					t.Fatalf("err = %v, want a *provider.Error", err)
				}
				if s := leak(err.Error(), key62); s != "" {
					t.Errorf("%q survives in %q", s, err)
				}
				control := p.run(l, text, otherKey)
				if leak(control.Error(), key62) == "" {
					t.Errorf("negative control: a client that does not know the key shows none of it: %q", control)
				}
			})
		}
	}
}

// TestNoKeyInModel has a server name the key as the turn's model, which
// a replay cassette records: it must not survive either, and a client that
// does not know the key shows it (the negative control).
func TestNoKeyInModel(t *testing.T) {
	l := newLab(t)
	for _, v := range []struct {
		name string
		body string
		open func(url, secret string) provider.Provider
	}{
		{"chat", `data: {"id":"c","model":"echo-` + key62 + `","choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":"stop"}]}` + "\n\ndata: [DONE]\n\n", compatible},
		{"anthropic", "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"model\":\"echo-" + key62 + "\"}}\n\n" +
			"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n", func(url, secret string) provider.Provider {
			c, err := anthropic.New(anthropic.Config{APIKey: provider.Secret(secret), Model: "m", BaseURL: url})
			if err != nil {
				panic(err)
			}
			return c
		}},
	} {
		t.Run(v.name, func(t *testing.T) {
			l.set(wiretest.SSE(v.body), "")
			resp, err := v.open(l.web.URL, key62).Complete(context.Background(), &provider.Request{}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if s := leak(resp.Model, key62); s != "" || !strings.HasPrefix(resp.Model, "echo-") {
				t.Errorf("Model = %q", resp.Model)
			}
			control, err := v.open(l.web.URL, otherKey).Complete(context.Background(), &provider.Request{}, nil)
			if err != nil || control.Model != "echo-"+key62 {
				t.Errorf("negative control: Model = %q, %v; want the echo whole", control.Model, err)
			}
		})
	}
}

// FuzzNoKeyInErrors puts the key, and a prefix of it of at least
// MinSecretRun characters, at random offsets of a random body, and sends
// that on every path of [TestNoKeyInErrors]: no run of MinSecretRun of
// the key's characters may survive in any error's text.
func FuzzNoKeyInErrors(f *testing.F) {
	f.Add("Invalid API key provided", uint16(17), uint16(0), uint8(37))
	f.Add(strings.Repeat("m", 190), uint16(155), uint16(3), uint8(0))
	f.Add("a\nb\r\nerror: c\x00d\xff", uint16(2), uint16(9), uint8(200))
	f.Add(`{"error":{"message":"x"}}`, uint16(21), uint16(21), uint8(5))
	l := newLab(f)
	ps := paths()
	f.Fuzz(func(t *testing.T, body string, at, at2 uint16, n uint8) {
		if len(body) > 4<<10 {
			return
		}
		insert := func(s string, at int, piece string) string {
			at %= len(s) + 1
			return s[:at] + piece + s[at:]
		}
		prefix := key62[:wire.MinSecretRun+int(n)%(len(key62)-wire.MinSecretRun+1)]
		text := insert(insert(body, int(at), key62), int(at2), prefix)
		// One path per input, chosen by the input: every path is reached
		// over the run, and an input costs one round trip, not a dozen.
		// (TestNoKeyInErrors runs every path on its own texts.)
		for _, p := range []path{ps[(int(at)+int(at2)+int(n))%len(ps)]} {
			err := p.run(l, text, key62)
			if err == nil {
				continue // a body that happened to be a valid answer
			}
			if provider.AsError(err) == nil {
				t.Fatalf("%s: err = %v, want a *provider.Error", p.name, err)
			}
			if s := leak(err.Error(), key62); s != "" {
				t.Fatalf("%s: %q survives in %q", p.name, s, err)
			}
		}
	})
}
