package mcp

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"sync"
)

// capped is the RoundTripper of an HTTP server: it bounds every response
// body by the output cap (an SSE stream line by line, any other body in
// all), and stops the standalone GET stream after repeated failures, so
// that the SDK does not retry it every second forever (bug M2).
type capped struct {
	base http.RoundTripper
	max  int64

	mu          sync.Mutex
	getFailures int
}

// getFailuresMax is how many failed GET streams in a row end listening.
const getFailuresMax = 3

func (c *capped) RoundTrip(req *http.Request) (*http.Response, error) {
	isGet := req.Method == http.MethodGet
	if isGet {
		c.mu.Lock()
		stop := c.getFailures >= getFailuresMax
		c.mu.Unlock()
		if stop {
			// 405 is what tells the SDK the server offers no stream.
			return &http.Response{StatusCode: http.StatusMethodNotAllowed, Status: "405 Method Not Allowed",
				Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Header: http.Header{},
				Body: io.NopCloser(strings.NewReader("")), Request: req}, nil
		}
	}
	resp, err := c.base.RoundTrip(req)
	if isGet {
		c.mu.Lock()
		if err != nil || resp.StatusCode >= 400 && resp.StatusCode != http.StatusNotFound && resp.StatusCode != http.StatusMethodNotAllowed {
			c.getFailures++
		} else {
			c.getFailures = 0
		}
		c.mu.Unlock()
	}
	if err != nil {
		return nil, err
	}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if mt == "text/event-stream" {
		resp.Body = &lineCapped{r: bufio.NewReaderSize(resp.Body, 64<<10), c: resp.Body, max: c.max}
	} else {
		resp.Body = &sizeCapped{r: resp.Body, max: c.max, left: c.max}
	}
	return resp, nil
}

// errCap is the error of a body over the output cap.
type errCap struct{ max int64 }

func (e errCap) Error() string {
	return fmt.Sprintf("the server's answer is over the %d-byte output cap (max_output)", e.max)
}

// sizeCapped fails a body longer than left bytes.
type sizeCapped struct {
	r    io.ReadCloser
	max  int64
	left int64
}

func (s *sizeCapped) Read(p []byte) (int, error) {
	if s.left < 0 {
		return 0, errCap{max: s.max}
	}
	if int64(len(p)) > s.left+1 {
		p = p[:s.left+1]
	}
	n, err := s.r.Read(p)
	s.left -= int64(n)
	if s.left < 0 {
		return 0, errCap{max: s.max}
	}
	return n, err
}

func (s *sizeCapped) Close() error { return s.r.Close() }

// lineCapped fails an SSE stream with a line longer than max bytes.
type lineCapped struct {
	r    *bufio.Reader
	c    io.Closer
	max  int64
	line int64
	err  error
	buf  []byte
}

func (l *lineCapped) Read(p []byte) (int, error) {
	if len(l.buf) == 0 {
		if l.err != nil {
			return 0, l.err
		}
		chunk, err := l.r.ReadSlice('\n')
		l.buf = append(l.buf[:0], chunk...)
		l.line += int64(len(chunk))
		if l.line > l.max+1 {
			l.buf, l.err = nil, errCap{max: l.max}
			return 0, l.err
		}
		if bytes.IndexByte(chunk, '\n') >= 0 {
			l.line = 0
		}
		if err != nil && err != bufio.ErrBufferFull {
			l.err = err
		}
		if len(l.buf) == 0 {
			return 0, l.err
		}
	}
	n := copy(p, l.buf)
	l.buf = l.buf[n:]
	return n, nil
}

func (l *lineCapped) Close() error { return l.c.Close() }
