package mcp_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/initorigin/io-harness-go/pkg/harness/mcp"
	"github.com/initorigin/io-harness-go/pkg/harness/media"
	"github.com/initorigin/io-harness-go/pkg/harness/policy"
	"github.com/initorigin/io-harness-go/pkg/harness/tool"
)

// TestFakeServerTools connects the fake server, lists its tools under
// their namespaced names, and calls one.
func TestFakeServerTools(t *testing.T) {
	rec := &recorder{}
	c := connect(t, mcp.Options{Servers: []mcp.Server{fake("fk")}, Observer: rec.observe})
	echo := find(t, c, "mcp__fk__echo")
	if !tool.IsIdempotent(echo) {
		t.Errorf("echo says readOnlyHint: it should be idempotent")
	}
	if !tool.IsIdempotent(find(t, c, "mcp__fk__idem")) {
		t.Errorf("idem says idempotentHint: it should be idempotent")
	}
	if tool.IsIdempotent(find(t, c, "mcp__fk__write")) {
		t.Errorf("write has no annotations: it must not be idempotent")
	}
	r := call(t, echo, `{"text":"hi"}`)
	if r.IsError || r.Output != "echo: hi" {
		t.Fatalf("echo: %+v", r)
	}
	conn := rec.of(mcp.EventConnect)
	if len(conn) != 1 || conn[0].Outcome != "ok" || conn[0].Protocol != "2025-11-25" || conn[0].Transport != "stdio" ||
		conn[0].Backend != "host" || !conn[0].Host || conn[0].Enforcement == nil || conn[0].Enforcement.Gaps == "" {
		t.Errorf("connect events: %+v", conn)
	}
	calls := rec.of(mcp.EventCall)
	if len(calls) != 1 || calls[0].Tool != "mcp__fk__echo" || calls[0].Outcome != "ok" {
		t.Errorf("call events: %+v", calls)
	}
	if len(rec.of(mcp.EventStderr)) == 0 {
		t.Errorf("the server's stderr (\"fake server ready\") was not traced")
	}
}

// TestContent: text, an image (shown to the model, as view_image shows
// one, or refused by name), a resource link, an embedded resource and
// structured content all reach the model; isError marks a tool error.
func TestContent(t *testing.T) {
	c := connect(t, mcp.Options{Servers: []mcp.Server{fake("fk")}})
	r := call(t, find(t, c, "mcp__fk__media"), `{}`)
	png, _ := base64.StdEncoding.DecodeString(onePixelPNG)
	want := "a picture:\n" +
		"[image from the tool: image/png, 1×1 pixels, " + strconv.Itoa(len(png)) + " bytes, sha256 " + media.Hash(png) + "]\n" +
		"[image: image/svg+xml, not shown: SVG images cannot be shown to the model: only PNG, JPEG, GIF and WebP (and BMP and TIFF, converted to PNG); convert it to PNG first]\n" +
		`[resource link: file:///doc.txt name="doc" type=text/plain — a document]` + "\n" +
		"[embedded resource mem://note (text/plain)]\nembedded note"
	if diff := cmp.Diff(want, r.Output); diff != "" || r.IsError {
		t.Errorf("media (-want +got):\n%s", diff)
	}
	if len(r.Images) != 1 || r.Images[0].MediaType != "image/png" || !bytes.Equal(r.Images[0].Data, png) {
		t.Errorf("the images shown: %+v", r.Images)
	}
	r = call(t, find(t, c, "mcp__fk__structured"), `{}`)
	if r.Output != `structured content: {"height":1,"width":1}` {
		t.Errorf("structured content alone: %q", r.Output)
	}
	r = call(t, find(t, c, "mcp__fk__fail"), `{}`)
	if !r.IsError || r.Output != "[tool error] it went wrong" {
		t.Errorf("fail: %+v", r)
	}
	// The observation is bounded like a built-in tool's.
	r = call(t, find(t, c, "mcp__fk__flood"), `{"bytes": 100000}`)
	if len(r.Output) > 32<<10 || !strings.Contains(r.Output, "[output truncated:") {
		t.Errorf("a 100 kB answer: %d bytes, ends %q", len(r.Output), r.Output[max(0, len(r.Output)-100):])
	}
}

// TestNames maps awkward names to valid, distinct names that never
// shadow a built-in, and drops a duplicate.
func TestNames(t *testing.T) {
	c := connect(t, mcp.Options{Servers: []mcp.Server{fake("fk", "FAKE_NAMES=1")}})
	seen := map[string]string{}
	for _, tl := range c.Tools() {
		name := tl.Spec().Name
		remote := tl.(*mcp.Tool).Remote()
		if len(name) > mcp.MaxNameLen || strings.Trim(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-") != "" {
			t.Errorf("%q is not a name every vendor accepts", name)
		}
		if tool.IsBuiltin(name) {
			t.Errorf("%q shadows a built-in", name)
		}
		if other, ok := seen[name]; ok {
			t.Errorf("%q and %q both map to %s", remote, other, name)
		}
		seen[name] = remote
	}
	for _, want := range []string{"mcp__fk__echo", "mcp__fk__weird_name_x", "mcp__fk__write_file"} {
		if _, ok := seen[want]; !ok {
			t.Errorf("no %s among %v", want, seen)
		}
	}
	var weird, long string
	for name, remote := range seen {
		switch remote {
		case "weird.name/x":
			weird = name
		case strings.Repeat("long", 20):
			long = name
		}
	}
	if !strings.HasPrefix(weird, "mcp__fk__weird_name_x_") || len(long) != mcp.MaxNameLen {
		t.Errorf("weird.name/x → %q, the 80-byte name → %q", weird, long)
	}
	if n := strings.Count(strings.Join(keys(seen), " "), "mcp__fk__echo"); n != 1 {
		t.Errorf("echo, listed twice, appears %d times", n)
	}
	info := c.Servers()[0]
	if len(info.Notes) != 1 || !strings.Contains(info.Notes[0], `"echo" is listed twice`) {
		t.Errorf("notes: %q", info.Notes)
	}
	// The mapped names call the server's own tool.
	r := call(t, find(t, c, weird), `{}`)
	if !strings.Contains(r.Output, "unknown tool weird.name/x") {
		t.Errorf("calling %s reached %q", weird, r.Output)
	}
}

func keys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestStartJudged: starting a stdio server is an exec of its argv. A
// policy that denies the program stops Connect with ErrRefused before the
// server runs; the negative control allows it and the server starts.
func TestStartJudged(t *testing.T) {
	srv := fake("fk")
	rec := &recorder{}
	deny := policy.Permissive()
	deny.Layers = []policy.Layer{{Name: "mcp", Rules: []policy.Rule{{Act: policy.Exec, Effect: policy.Deny, Pattern: srv.Command[0]}}}}
	_, err := mcp.Connect(context.Background(), mcp.Options{Servers: []mcp.Server{srv}, Gate: gate(deny), Observer: rec.observe})
	var me *mcp.Error
	if !errors.Is(err, mcp.ErrRefused) || !errors.As(err, &me) || me.Server != "fk" {
		t.Fatalf("Connect with the program denied: %v; want ErrRefused naming fk", err)
	}
	if len(rec.of(mcp.EventConnect)) != 0 || len(rec.of(mcp.EventStderr)) != 0 {
		t.Errorf("the refused server ran: %+v", rec.events)
	}
	if v := rec.of(mcp.EventVerdict); len(v) != 1 || v[0].Outcome != "refused" || v[0].Verdict.Layer != "mcp" {
		t.Errorf("verdict events: %+v", v)
	}
	// Negative control: the same server, allowed, starts.
	connect(t, mcp.Options{Servers: []mcp.Server{srv}, Gate: gate(policy.Permissive())})
}

// TestUncontained: a stdio server that does not say host: true never
// runs on the host: without a launcher it is ErrUncontained.
func TestUncontained(t *testing.T) {
	srv := fake("fk")
	srv.Host = false
	_, err := mcp.Connect(context.Background(), mcp.Options{Servers: []mcp.Server{srv}})
	if !errors.Is(err, mcp.ErrUncontained) {
		t.Fatalf("Connect: %v; want ErrUncontained", err)
	}
}

// TestListChanged: a server's notifications/tools/list_changed makes the
// next Refresh (at a step boundary) offer the new tool; without one,
// Refresh changes nothing.
func TestListChanged(t *testing.T) {
	c := connect(t, mcp.Options{Servers: []mcp.Server{fake("fk")}})
	if c.Refresh(context.Background()) {
		t.Errorf("Refresh reported a change before any")
	}
	n := len(c.Tools())
	if r := call(t, find(t, c, "mcp__fk__add_tool"), `{}`); r.IsError {
		t.Fatalf("add_tool: %+v", r)
	}
	if !waitFor(5*time.Second, func() bool { return c.Refresh(context.Background()) }) {
		t.Fatalf("Refresh never saw the change")
	}
	if len(c.Tools()) != n+1 {
		t.Errorf("%d tools after the change; want %d", len(c.Tools()), n+1)
	}
	if r := call(t, find(t, c, "mcp__fk__late"), `{}`); !strings.Contains(r.Output, "unknown tool late") {
		t.Errorf("late: %+v", r)
	}
}

// TestSamplingRefused: the client does not offer sampling; a server that
// asks anyway gets an error, and the call goes on.
func TestSamplingRefused(t *testing.T) {
	c := connect(t, mcp.Options{Servers: []mcp.Server{fake("fk")}})
	r := call(t, find(t, c, "mcp__fk__sample"), `{}`)
	if r.IsError || !strings.Contains(r.Output, "result= error={") {
		t.Errorf("sample: %+v; want the server to have got an error", r)
	}
}

// TestElicitation goes to the Elicit callback (the harness's approval
// gate); without one it is declined.
func TestElicitation(t *testing.T) {
	var asked []mcp.Elicitation
	c := connect(t, mcp.Options{Servers: []mcp.Server{fake("fk")},
		Elicit: func(ctx context.Context, e mcp.Elicitation) (mcp.ElicitationResult, error) {
			asked = append(asked, e)
			return mcp.ElicitationResult{Action: mcp.ElicitAccept, Content: map[string]any{"name": "Ada"}}, nil
		}})
	r := call(t, find(t, c, "mcp__fk__elicit"), `{}`)
	if !strings.Contains(r.Output, `"action":"accept"`) || !strings.Contains(r.Output, `"name":"Ada"`) {
		t.Errorf("elicit: %+v", r)
	}
	if len(asked) != 1 || asked[0].Server != "fk" || asked[0].Message != "What is your name?" || !strings.Contains(string(asked[0].Schema), `"name"`) {
		t.Errorf("asked: %+v", asked)
	}
	// Without a callback the capability is not offered: the server's
	// request fails and the call goes on.
	c2 := connect(t, mcp.Options{Servers: []mcp.Server{fake("fk")}})
	r = call(t, find(t, c2, "mcp__fk__elicit"), `{}`)
	if r.IsError || !strings.Contains(r.Output, "result= error={") {
		t.Errorf("elicit without a callback: %+v", r)
	}
}
