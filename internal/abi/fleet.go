package abi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/initorigin/io-harness-go/pkg/harness/fleet"
	"github.com/initorigin/io-harness-go/pkg/harness/store"
	"github.com/initorigin/io-harness-go/pkg/harness/store/postgres"
)

// fleetOf returns the harness's store as a fleet's, or an error that says
// the method needs one.
func fleetOf(h *harnessEntry, method string) (*postgres.Store, error) {
	st, err := fleet.Of(h.st)
	if err != nil {
		return nil, fmt.Errorf("%w: %s needs a harness opened on a postgres:// store: %v", errInvalid, method, err)
	}
	return st, nil
}

// runSubmit enqueues a run for a fleet's workers and returns its id at
// once.
func (a *ABI) runSubmit(ctx context.Context, raw json.RawMessage) (any, error) {
	var p struct {
		Harness uint64          `json:"harness"`
		Spec    json.RawMessage `json:"spec"`
		Upload  bool            `json:"upload"`
	}
	if err := decodeParams(raw, &p); err != nil {
		return nil, err
	}
	h, err := a.openOf(p.Harness)
	if err != nil {
		return nil, err
	}
	if len(p.Spec) == 0 {
		return nil, fmt.Errorf("%w: params.spec: required", errInvalid)
	}
	st, err := fleetOf(h, "run.submit")
	if err != nil {
		return nil, err
	}
	id, err := fleet.Submit(ctx, st, p.Spec, fleet.SubmitOptions{Upload: p.Upload})
	if err != nil {
		return nil, specError(err)
	}
	return map[string]any{"run_id": id, "state": fleet.StateQueued}, nil
}

// submitted returns the harness's store when runID was submitted to it as
// a fleet's queue, and nil for any other run or store.
func submitted(ctx context.Context, h *harnessEntry, runID string) (*postgres.Store, error) {
	st, err := fleet.Of(h.st)
	if err != nil {
		return nil, nil
	}
	if _, err := st.Submission(ctx, runID); errors.Is(err, store.ErrNotFound) {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	return st, nil
}

// runFetch writes the workspace an uploaded fleet run left into a
// directory.
func (a *ABI) runFetch(ctx context.Context, raw json.RawMessage) (any, error) {
	var p struct {
		Harness uint64 `json:"harness"`
		RunID   string `json:"run_id"`
		Dir     string `json:"dir"`
	}
	if err := decodeParams(raw, &p); err != nil {
		return nil, err
	}
	h, err := a.openOf(p.Harness)
	if err != nil {
		return nil, err
	}
	switch {
	case p.RunID == "":
		return nil, fmt.Errorf("%w: params.run_id: required", errInvalid)
	case p.Dir == "" || strings.ContainsRune(p.Dir, 0):
		return nil, fmt.Errorf("%w: params.dir: a directory that does not exist or is empty", errInvalid)
	}
	st, err := fleetOf(h, "run.fetch")
	if err != nil {
		return nil, err
	}
	dir, err := filepath.Abs(p.Dir)
	if err != nil {
		return nil, fmt.Errorf("%w: params.dir: %v", errInvalid, err)
	}
	files, err := fleet.Fetch(ctx, st, p.RunID, dir)
	if err != nil {
		return nil, err
	}
	return map[string]any{"dir": dir, "files": files}, nil
}

// writeQueue appends a run's queue log to its text trace.
func writeQueue(b *strings.Builder, queue []postgres.QueueEntry) {
	if len(queue) == 0 {
		return
	}
	b.WriteString("\nqueue\n")
	for _, e := range queue {
		fmt.Fprintf(b, "  %s  %-15s", e.At.Local().Format("2006-01-02 15:04:05.000"), e.Action)
		if e.Worker != "" {
			fmt.Fprintf(b, " %s", e.Worker)
		}
		if e.Job != 0 {
			fmt.Fprintf(b, " job %d", e.Job)
			if e.Attempt > 0 {
				fmt.Fprintf(b, " attempt %d", e.Attempt)
			}
		}
		if e.Detail != "" {
			fmt.Fprintf(b, ": %s", e.Detail)
		}
		b.WriteString("\n")
	}
}
