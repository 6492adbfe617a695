package fleet

import (
	"context"
	"slices"
	"strings"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/initorigin/io-harness-go/pkg/harness/store"
	"github.com/initorigin/io-harness-go/pkg/harness/store/postgres"
)

// The states of a run in a fleet, as [Runs] reports them.
const (
	// StateQueued: waiting for a worker — submitted, handed back, or a
	// decision or rescue waits.
	StateQueued = "queued"
	// StateRunning: a worker drives it (Worker names it).
	StateRunning = "running"
	// StatePaused: waiting for a person's decision; it holds no worker.
	StatePaused = "paused"
	// StateFinished: it has its outcome.
	StateFinished = "finished"
	// StateStalled: nobody drives it and no job waits for it — its
	// worker died and no other worker has swept it up yet, or every
	// worker refused it (see the queue log).
	StateStalled = "stalled"
)

// RunState is a run as a fleet sees it: its record, where it stands, and
// who drives it.
type RunState struct {
	store.Run
	// State is one of the State constants.
	State string `json:"state"`
	// Worker is the process that holds the run's lease, while one does.
	Worker string `json:"worker,omitempty"`
	// Last is the run's latest queue action.
	Last *postgres.QueueEntry `json:"last,omitempty"`
}

// waiting are the job states of a job that a worker will still take.
var waiting = []rivertype.JobState{rivertype.JobStateAvailable, rivertype.JobStatePending,
	rivertype.JobStateRetryable, rivertype.JobStateScheduled}

// Runs lists a fleet's runs, newest first, with where each stands. It only
// reads, and works on a store opened read-only.
func Runs(ctx context.Context, st *postgres.Store, f store.RunFilter) ([]RunState, error) {
	runs, err := st.Runs(ctx, f)
	if err != nil {
		return nil, err
	}
	ids := make([]string, len(runs))
	for i := range runs {
		ids[i] = runs[i].ID
	}
	pending, err := withJobs(ctx, st, ids, waiting)
	if err != nil {
		return nil, err
	}
	// A queued run whose job a worker has taken is being claimed.
	claimed, err := withJobs(ctx, st, ids, []rivertype.JobState{rivertype.JobStateRunning})
	if err != nil {
		return nil, err
	}
	self := store.Self()
	out := make([]RunState, len(runs))
	for i, r := range runs {
		rs := RunState{Run: r}
		switch r.Status {
		case store.StatusFinished:
			rs.State = StateFinished
		case store.StatusPaused:
			rs.State = StatePaused
			if pending[r.ID] {
				rs.State = StateQueued
			}
		default:
			// Queued or running: a run no worker drives, that no job
			// waits for — every job of a queued run refused and
			// cancelled, the worker of a running one dead — is stalled.
			l, err := st.Lease(ctx, r.ID)
			switch {
			case err != nil:
				return nil, err
			case l != nil && !l.Owner.Gone(self):
				rs.State, rs.Worker = StateRunning, ownerName(l.Owner)
			case pending[r.ID], r.Status == store.StatusQueued && claimed[r.ID]:
				rs.State = StateQueued
			default:
				rs.State = StateStalled
			}
		}
		if log, err := st.QueueLog(ctx, r.ID); err == nil && len(log) > 0 {
			rs.Last = &log[len(log)-1]
		}
		out[i] = rs
	}
	return out, nil
}

// withJobs returns which of the runs have a job in one of the states. A
// database without the job engine's tables has no jobs.
func withJobs(ctx context.Context, st *postgres.Store, ids []string, states []rivertype.JobState) (map[string]bool, error) {
	jobs, err := jobsOf(ctx, st, ids, states)
	out := map[string]bool{}
	for id := range jobs {
		out[id] = true
	}
	return out, err
}

// jobsOf returns the runs' jobs in one of the states, by run. A database
// without the job engine's tables has no jobs.
func jobsOf(ctx context.Context, st *postgres.Store, ids []string, states []rivertype.JobState) (map[string][]*rivertype.JobRow, error) {
	out := map[string][]*rivertype.JobRow{}
	if len(ids) == 0 {
		return out, nil
	}
	c, err := inserter(st)
	if err != nil {
		return nil, err
	}
	res, err := c.JobList(ctx, river.NewJobListParams().Kinds(Kind).States(states...).
		Where("args->>'run_id' = ANY(@ids)", river.NamedArgs{"ids": ids}).First(10_000))
	if err != nil {
		if strings.Contains(err.Error(), "river_job") && strings.Contains(err.Error(), "does not exist") {
			return out, nil
		}
		return nil, err
	}
	for _, j := range res.Jobs {
		var a Args
		if err := decodeArgs(j.EncodedArgs, &a); err == nil && slices.Contains(ids, a.RunID) {
			out[a.RunID] = append(out[a.RunID], j)
		}
	}
	return out, nil
}
