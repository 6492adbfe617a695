// Package browser drives a headless Chromium for tests, over the DevTools
// protocol on a pipe (--remote-debugging-pipe): no port is opened and no
// WebSocket library is needed. It loads pages, evaluates expressions in
// them, watches their requests and takes screenshots.
//
// It is test support: the tests that use it skip, saying why, when no
// Chromium is installed (Debian's package is chromium; make deps installs
// it).
package browser

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"time"
)

// ErrNoBrowser is returned by Start when no Chromium is installed.
var ErrNoBrowser = errors.New("browser: no chromium, chromium-browser or google-chrome on PATH (Debian: apt-get install chromium; make deps installs it)")

// Browser is a running headless Chromium.
//
// It owns the browser process and one goroutine that reads its messages;
// Close ends both.
type Browser struct {
	cmd  *exec.Cmd
	in   *os.File // the browser reads commands from it (its fd 3)
	out  *os.File // the browser writes answers to it (its fd 4)
	dir  string
	done chan struct{}

	mu      sync.Mutex
	next    int64
	pending map[int64]chan message
	events  map[string][]message // by session
	wmu     sync.Mutex
}

type message struct {
	ID        int64           `json:"id,omitempty"`
	Method    string          `json:"method,omitempty"`
	Params    json.RawMessage `json:"params,omitempty"`
	Result    json.RawMessage `json:"result,omitempty"`
	Error     *protoError     `json:"error,omitempty"`
	SessionID string          `json:"sessionId,omitempty"`
}

type protoError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

// Path returns the Chromium executable, or ErrNoBrowser.
func Path() (string, error) {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", ErrNoBrowser
}

// Start starts a headless Chromium with a fresh profile.
func Start() (*Browser, error) {
	bin, err := Path()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "io-harness-browser-")
	if err != nil {
		return nil, err
	}
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	args := []string{"--headless", "--remote-debugging-pipe", "--user-data-dir=" + dir, "--no-first-run",
		"--no-default-browser-check", "--disable-gpu", "--disable-extensions", "--disable-background-networking",
		"--disable-component-update", "--disable-sync", "--disable-default-apps", "--mute-audio", "--hide-scrollbars",
		"--disable-dev-shm-usage", "--allow-file-access-from-files"}
	if os.Geteuid() == 0 {
		// Chromium's own sandbox refuses to start as root.
		args = append(args, "--no-sandbox")
	}
	cmd := exec.Command(bin, append(args, "about:blank")...)
	cmd.ExtraFiles = []*os.File{inR, outW}
	cmd.Stderr = io.Discard
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	inR.Close()
	outW.Close()
	b := &Browser{cmd: cmd, in: inW, out: outR, dir: dir, done: make(chan struct{}),
		pending: map[int64]chan message{}, events: map[string][]message{}}
	go b.read()
	return b, nil
}

// read takes the browser's messages until its pipe closes.
func (b *Browser) read() {
	defer close(b.done)
	r := bufio.NewReader(b.out)
	for {
		data, err := r.ReadBytes(0)
		if err != nil {
			b.mu.Lock()
			for id, ch := range b.pending {
				close(ch)
				delete(b.pending, id)
			}
			b.mu.Unlock()
			return
		}
		var m message
		if json.Unmarshal(data[:len(data)-1], &m) != nil {
			continue
		}
		b.mu.Lock()
		if m.ID != 0 {
			if ch, ok := b.pending[m.ID]; ok {
				ch <- m
				delete(b.pending, m.ID)
			}
		} else if m.Method != "" {
			b.events[m.SessionID] = append(b.events[m.SessionID], m)
		}
		b.mu.Unlock()
	}
}

// call sends one command and waits for its answer.
func (b *Browser) call(ctx context.Context, session, method string, params, out any) error {
	b.mu.Lock()
	b.next++
	id := b.next
	ch := make(chan message, 1)
	b.pending[id] = ch
	b.mu.Unlock()
	req := map[string]any{"id": id, "method": method}
	if params != nil {
		req["params"] = params
	}
	if session != "" {
		req["sessionId"] = session
	}
	data, err := json.Marshal(req)
	if err != nil {
		return err
	}
	b.wmu.Lock()
	_, err = b.in.Write(append(data, 0))
	b.wmu.Unlock()
	if err != nil {
		return fmt.Errorf("browser: %s: %w", method, err)
	}
	select {
	case m, ok := <-ch:
		if !ok {
			return fmt.Errorf("browser: %s: the browser went away", method)
		}
		if m.Error != nil {
			return fmt.Errorf("browser: %s: %s", method, m.Error.Message)
		}
		if out != nil {
			return json.Unmarshal(m.Result, out)
		}
		return nil
	case <-ctx.Done():
		b.mu.Lock()
		delete(b.pending, id)
		b.mu.Unlock()
		return fmt.Errorf("browser: %s: %w", method, ctx.Err())
	}
}

// Close ends the browser and removes its profile.
func (b *Browser) Close() error {
	b.call(context.Background(), "", "Browser.close", nil, nil)
	b.in.Close()
	done := make(chan error, 1)
	go func() { done <- b.cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		b.cmd.Process.Kill()
		<-done
	}
	b.out.Close()
	<-b.done
	return os.RemoveAll(b.dir)
}

// Page is one tab.
type Page struct {
	b       *Browser
	session string
}

// NewPage opens a tab of width × height CSS pixels.
func (b *Browser) NewPage(ctx context.Context, width, height int) (*Page, error) {
	var t struct {
		TargetID string `json:"targetId"`
	}
	if err := b.call(ctx, "", "Target.createTarget", map[string]any{"url": "about:blank"}, &t); err != nil {
		return nil, err
	}
	var s struct {
		SessionID string `json:"sessionId"`
	}
	if err := b.call(ctx, "", "Target.attachToTarget", map[string]any{"targetId": t.TargetID, "flatten": true}, &s); err != nil {
		return nil, err
	}
	p := &Page{b: b, session: s.SessionID}
	for _, m := range []string{"Page.enable", "Runtime.enable", "Network.enable"} {
		if err := b.call(ctx, p.session, m, nil, nil); err != nil {
			return nil, err
		}
	}
	if err := b.call(ctx, p.session, "Emulation.setDeviceMetricsOverride",
		map[string]any{"width": width, "height": height, "deviceScaleFactor": 1, "mobile": false}, nil); err != nil {
		return nil, err
	}
	return p, nil
}

// Navigate loads url and waits for its load event.
func (p *Page) Navigate(ctx context.Context, url string) error {
	p.b.mu.Lock()
	seen := len(p.b.events[p.session])
	p.b.mu.Unlock()
	var nav struct {
		ErrorText string `json:"errorText"`
	}
	if err := p.b.call(ctx, p.session, "Page.navigate", map[string]any{"url": url}, &nav); err != nil {
		return err
	}
	if nav.ErrorText != "" {
		return fmt.Errorf("browser: navigate %s: %s", url, nav.ErrorText)
	}
	for {
		p.b.mu.Lock()
		evs := p.b.events[p.session][seen:]
		p.b.mu.Unlock()
		for _, m := range evs {
			if m.Method == "Page.loadEventFired" {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("browser: navigate %s: %w", url, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Eval evaluates a JavaScript expression in the page (awaiting a promise)
// and decodes its value into out.
func (p *Page) Eval(ctx context.Context, expr string, out any) error {
	var r struct {
		Result struct {
			Value json.RawMessage `json:"value"`
		} `json:"result"`
		Exception *struct {
			Text      string `json:"text"`
			Exception struct {
				Description string `json:"description"`
			} `json:"exception"`
		} `json:"exceptionDetails"`
	}
	if err := p.b.call(ctx, p.session, "Runtime.evaluate", map[string]any{"expression": expr, "returnByValue": true, "awaitPromise": true}, &r); err != nil {
		return err
	}
	if r.Exception != nil {
		return fmt.Errorf("browser: %s: %s %s", expr, r.Exception.Text, r.Exception.Exception.Description)
	}
	if out != nil && len(r.Result.Value) > 0 {
		return json.Unmarshal(r.Result.Value, out)
	}
	return nil
}

// WaitFor evaluates expr until it is true or ctx ends.
func (p *Page) WaitFor(ctx context.Context, expr string) error {
	for {
		var ok bool
		if err := p.Eval(ctx, "!!("+expr+")", &ok); err != nil {
			return err
		}
		if ok {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("browser: waiting for %s: %w", expr, ctx.Err())
		case <-time.After(25 * time.Millisecond):
		}
	}
}

// Screenshot returns the page as a PNG.
func (p *Page) Screenshot(ctx context.Context) ([]byte, error) {
	var r struct {
		Data string `json:"data"`
	}
	if err := p.b.call(ctx, p.session, "Page.captureScreenshot", map[string]any{"format": "png"}, &r); err != nil {
		return nil, err
	}
	return base64.StdEncoding.DecodeString(r.Data)
}

// Requests returns the URLs the page has asked for so far, in order.
func (p *Page) Requests() []string {
	p.b.mu.Lock()
	defer p.b.mu.Unlock()
	var out []string
	for _, m := range p.b.events[p.session] {
		if m.Method != "Network.requestWillBeSent" {
			continue
		}
		var r struct {
			Request struct {
				URL string `json:"url"`
			} `json:"request"`
		}
		if json.Unmarshal(m.Params, &r) == nil {
			out = append(out, r.Request.URL)
		}
	}
	return out
}

// Console returns the console messages and exceptions the page reported.
func (p *Page) Console() []string {
	p.b.mu.Lock()
	defer p.b.mu.Unlock()
	var out []string
	for _, m := range p.b.events[p.session] {
		switch m.Method {
		case "Runtime.consoleAPICalled", "Runtime.exceptionThrown":
			out = append(out, m.Method+" "+string(m.Params))
		}
	}
	return out
}
