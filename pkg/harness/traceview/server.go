package traceview

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"html/template"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/initorigin/io-harness-go/pkg/harness/store"
)

// Server serves every run of a store: an index of the runs at /, each run
// and the runs below it at /runs/RUN_ID as the page WriteHTML writes, and
// the page's data at /api/runs/RUN_ID/view, which the page asks for again
// while anything in it runs. It only reads the store.
//
// It answers only requests addressed to a loopback host (127.0.0.1,
// localhost, ::1): a web page elsewhere that makes the browser resolve its
// own name to 127.0.0.1 (DNS rebinding) is refused, so the store's
// content does not leave the machine through a browser.
type Server struct {
	st    store.Reader
	r     *renderer
	index *template.Template
	ixJS  string
	ixCSP string
	mux   *http.ServeMux

	mu    sync.Mutex
	cache map[string]*cached
}

// cached is a view recently read, so that many pages polling one run cost
// one read a second.
type cached struct {
	at   time.Time
	view *View
	err  error
}

// NewServer returns a server of st's runs.
func NewServer(st store.Reader) (*Server, error) {
	r, err := newRenderer()
	if err != nil {
		return nil, err
	}
	page, err := assets.ReadFile("assets/index.html")
	if err != nil {
		return nil, err
	}
	js, err := assets.ReadFile("assets/index.js")
	if err != nil {
		return nil, err
	}
	t, err := template.New("index").Parse(string(page))
	if err != nil {
		return nil, err
	}
	s := &Server{st: st, r: r, index: t, ixJS: string(js), cache: map[string]*cached{},
		ixCSP: "default-src 'none'; script-src " + cspHash(js) + "; style-src " + r.styleHash +
			"; img-src data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"}
	s.mux = http.NewServeMux()
	s.mux.HandleFunc("GET /{$}", s.serveIndex)
	s.mux.HandleFunc("GET /runs/{id}", s.serveRun)
	s.mux.HandleFunc("GET /api/runs", s.serveRuns)
	s.mux.HandleFunc("GET /api/runs/{id}/view", s.serveView)
	return s, nil
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !loopbackHost(r.Host) {
		http.Error(w, "traceview: this server answers requests for 127.0.0.1, localhost and ::1 only", http.StatusForbidden)
		return
	}
	h := w.Header()
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-store")
	s.mux.ServeHTTP(w, r)
}

// loopbackHost reports whether a Host header names this machine's
// loopback interface.
func loopbackHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// runRow is a run of the index.
type runRow struct {
	ID       string `json:"id"`
	ParentID string `json:"parent_id,omitempty"`
	Path     string `json:"path"`
	Status   string `json:"status"`
	Outcome  string `json:"outcome"`
	Steps    int    `json:"steps"`
	Tokens   string `json:"tokens"`
	Cost     string `json:"cost"`
	Started  string `json:"started"`
}

// maxIndex bounds the runs the index lists.
const maxIndex = 1000

func (s *Server) rows(ctx context.Context) ([]runRow, error) {
	runs, err := s.st.Runs(ctx, store.RunFilter{Limit: maxIndex})
	if err != nil {
		return nil, err
	}
	out := make([]runRow, len(runs))
	for i, r := range runs {
		out[i] = runRow{ID: r.ID, ParentID: r.ParentID, Path: r.AgentPath, Status: string(r.Status), Outcome: r.Outcome, Steps: r.Steps,
			Tokens: thousands(r.Usage.Total()), Cost: Money{USD: r.Cost.USD, Known: r.Cost.Known}.String(),
			Started: r.StartedAt.UTC().Format("2006-01-02 15:04:05")}
	}
	return out, nil
}

func (s *Server) serveIndex(w http.ResponseWriter, r *http.Request) {
	rows, err := s.rows(r.Context())
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	var b bytes.Buffer
	err = s.index.Execute(&b, map[string]any{"Store": s.st.Name(), "Runs": rows, "CSP": s.ixCSP,
		"Style": template.CSS(s.r.style), "Script": template.JS(s.ixJS)})
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Security-Policy", s.ixCSP)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Write(b.Bytes())
}

func (s *Server) serveRuns(w http.ResponseWriter, r *http.Request) {
	rows, err := s.rows(r.Context())
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	writeJSON(w, rows)
}

// view reads a run's view, at most once a second per run.
func (s *Server) view(ctx context.Context, id string) (*View, error) {
	s.mu.Lock()
	c := s.cache[id]
	if c != nil && time.Since(c.at) < time.Second {
		s.mu.Unlock()
		return c.view, c.err
	}
	s.mu.Unlock()
	v, err := Load(ctx, s.st, id)
	if v != nil {
		v.Live = true
	}
	s.mu.Lock()
	s.cache[id] = &cached{at: time.Now(), view: v, err: err}
	s.mu.Unlock()
	return v, err
}

func (s *Server) serveRun(w http.ResponseWriter, r *http.Request) {
	v, err := s.view(r.Context(), r.PathValue("id"))
	if err != nil {
		viewError(w, err)
		return
	}
	var b bytes.Buffer
	if err := s.r.write(&b, v); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Security-Policy", s.r.csp(true)+"; frame-ancestors 'none'")
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Write(b.Bytes())
}

func (s *Server) serveView(w http.ResponseWriter, r *http.Request) {
	v, err := s.view(r.Context(), r.PathValue("id"))
	if err != nil {
		viewError(w, err)
		return
	}
	tag := `"` + v.Version + `"`
	w.Header().Set("ETag", tag)
	if r.Header.Get("If-None-Match") == tag {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	writeJSON(w, v)
}

func viewError(w http.ResponseWriter, err error) {
	if errors.Is(err, store.ErrNotFound) {
		http.Error(w, err.Error(), http.StatusNotFound)
		return
	}
	http.Error(w, err.Error(), http.StatusInternalServerError)
}

func writeJSON(w http.ResponseWriter, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(data)
}
