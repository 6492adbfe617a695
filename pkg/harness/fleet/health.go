package fleet

import (
	"context"
	"encoding/json"
	"net/http"
	"sort"
	"time"
)

// Health is what a worker says of itself.
type Health struct {
	Worker string `json:"worker"`
	// State is idle (not yet running), working, draining (stopping: it
	// takes no jobs and hands back the runs it holds) or stopped.
	State       string `json:"state"`
	Concurrency int    `json:"concurrency"`
	// Held are the runs the worker drives now.
	Held []Held `json:"held"`
	// Jobs counts the jobs the worker has taken since it started.
	Jobs int64 `json:"jobs"`
	// Database is "ok", or why the database does not answer.
	Database string    `json:"database"`
	Since    time.Time `json:"since,omitzero"`
}

// Held is a run a worker drives.
type Held struct {
	RunID   string    `json:"run_id"`
	Job     int64     `json:"job"`
	Attempt int       `json:"attempt"`
	Step    int       `json:"step"`
	Since   time.Time `json:"since"`
}

// OK reports whether the worker works and reaches its database.
func (h *Health) OK() bool { return h.State == workerWorking && h.Database == "ok" }

// Health reports the worker's state, the runs it holds, and whether its
// database answers (within five seconds).
func (w *Worker) Health(ctx context.Context) Health {
	w.mu.Lock()
	h := Health{Worker: w.name, State: w.state, Concurrency: w.o.Concurrency, Jobs: w.driven.Load(), Since: w.since, Held: []Held{}}
	for _, d := range w.held {
		d.mu.Lock()
		h.Held = append(h.Held, Held{RunID: d.runID, Job: d.job, Attempt: d.attempt, Step: d.step, Since: d.since})
		d.mu.Unlock()
	}
	w.mu.Unlock()
	sort.Slice(h.Held, func(i, j int) bool { return h.Held[i].Job < h.Held[j].Job })
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	h.Database = "ok"
	if _, err := w.st.Now(ctx); err != nil {
		h.Database = err.Error()
	}
	return h
}

// Handler serves the worker's health as JSON at any path: status 200
// while it works and reaches its database, 503 otherwise.
func (w *Worker) Handler() http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			http.Error(rw, "GET only", http.StatusMethodNotAllowed)
			return
		}
		h := w.Health(r.Context())
		rw.Header().Set("Content-Type", "application/json")
		if !h.OK() {
			rw.WriteHeader(http.StatusServiceUnavailable)
		}
		json.NewEncoder(rw).Encode(&h)
	})
}
