package fleet

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"

	"github.com/initorigin/io-harness-go/pkg/harness"
	"github.com/initorigin/io-harness-go/pkg/harness/approve"
	"github.com/initorigin/io-harness-go/pkg/harness/provider/anthropic"
	"github.com/initorigin/io-harness-go/pkg/harness/provider/openai"
	"github.com/initorigin/io-harness-go/pkg/harness/provider/openrouter"
	"github.com/initorigin/io-harness-go/pkg/harness/store"
	"github.com/initorigin/io-harness-go/pkg/harness/store/postgres"
)

// WorkerOptions configure a [Worker]. The zero value works.
type WorkerOptions struct {
	// Concurrency is how many runs the worker drives at once; zero means 4.
	Concurrency int
	// LeaseTTL is how long a run's lease holds without a renewal (see
	// harness.Options.LeaseTTL); zero means 30 seconds. A worker that dies
	// on another host is noticed once its leases have been expired this
	// long again; one that dies on this host, at the next sweep.
	LeaseTTL time.Duration
	// Grace is how long, once Run's context is done, the runs the worker
	// holds may go on to their next step boundary, where each is handed
	// back to the queue; a run still inside a step then is handed back
	// there. Zero means 30 seconds.
	Grace time.Duration
	// LookupEnv reads the worker's environment for the provider keys,
	// models and base URLs the submitted specs leave out; nil reads
	// nothing. A key is never lent to a spec that names its own base URL:
	// it would go to a server the submitter chose.
	LookupEnv func(string) (string, bool)
	// MCPEnv names the environment variables the worker lends to the
	// ${NAME} references of a submitted spec's MCP servers; no other is
	// read for them.
	MCPEnv []string
	// Roots, when set, are the directories a shared workspace must be
	// in, after its links are resolved; a run elsewhere is refused.
	// Empty: any directory the worker's user can reach.
	Roots []string
	// Workspaces is the directory where the worker materialises uploaded
	// workspaces, one directory per run; workers that share it (the same
	// path on a shared filesystem) can resume each other's uploaded runs.
	// Empty: the worker refuses uploaded runs.
	Workspaces string
	// Name is the worker's name in the queue log; empty means host:pid.
	Name string
	// Logger receives the job engine's warnings and errors; nil discards
	// them. The queue log is the record; this is for an operator.
	Logger *slog.Logger
	// RescueAfter is when River's own rescuer gives up on a job still
	// running (see river.Config.RescueStuckJobsAfter); zero means an hour.
	// The worker's sweep, which follows the leases, rescues a run whose
	// driver died long before that.
	RescueAfter time.Duration
	// FetchPoll is how often the worker looks for jobs when no
	// notification wakes it; zero means one second.
	FetchPoll time.Duration
}

// Worker works a fleet's queue: it drives the runs River hands it,
// resumes the ones whose driver died, and hands back the ones it holds
// when it stops. Its methods are safe for concurrent use; Run is called
// once.
type Worker struct {
	st   *postgres.Store
	o    WorkerOptions
	self store.Owner
	name string

	client   *river.Client[pgx.Tx]
	draining atomic.Bool
	started  atomic.Bool
	driven   atomic.Int64
	since    time.Time

	mu    sync.Mutex
	state string
	held  map[int64]*drive // the runs being driven, by job id

	// decisions queues the jobs of the decisions that wait for a worker
	// (queueDecisions); a test replaces it to show that, without it, a
	// decided run is stranded.
	decisions func(context.Context) error
	// settle queues the settling of the jobs of finished runs that dead
	// workers left running (settleFinished), when the worker starts; a
	// test replaces it to show that, without it, such a job stays
	// running and its run has no finished line.
	settle func(context.Context) error

	// afterOutcome, when not nil, is called as soon as a drive returns
	// with the run's outcome committed: a test kills the process there.
	// Nothing outside the package's tests sets it.
	afterOutcome func()
}

// Worker states, as Health reports them.
const (
	workerIdle     = "idle"
	workerWorking  = "working"
	workerDraining = "draining"
	workerStopped  = "stopped"
)

// NewWorker returns a worker over st, a fleet's store.
//
// # Errors
//
// A negative or absurd option is a *harness.Error of kind ErrConfig.
func NewWorker(st *postgres.Store, o WorkerOptions) (*Worker, error) {
	switch {
	case o.Concurrency < 0 || o.Concurrency > 10_000:
		return nil, &harness.Error{Kind: harness.ErrConfig, Field: "concurrency", Message: "want 1 to 10000"}
	case o.LeaseTTL < 0 || (o.LeaseTTL > 0 && o.LeaseTTL < 100*time.Millisecond):
		return nil, &harness.Error{Kind: harness.ErrConfig, Field: "lease_ttl", Message: "want at least 100ms"}
	case o.Grace < 0 || o.RescueAfter < 0 || o.FetchPoll < 0:
		return nil, &harness.Error{Kind: harness.ErrConfig, Field: "grace", Message: "durations must not be negative"}
	}
	if o.Concurrency == 0 {
		o.Concurrency = 4
	}
	if o.LeaseTTL == 0 {
		o.LeaseTTL = 30 * time.Second
	}
	if o.Grace == 0 {
		o.Grace = 30 * time.Second
	}
	if o.RescueAfter == 0 {
		o.RescueAfter = time.Hour
	}
	if o.FetchPoll == 0 {
		o.FetchPoll = time.Second
	}
	if o.Logger == nil {
		o.Logger = quiet()
	}
	if o.Workspaces != "" {
		abs, err := filepath.Abs(o.Workspaces)
		if err != nil {
			return nil, &harness.Error{Kind: harness.ErrConfig, Field: "workspaces", Err: err}
		}
		o.Workspaces = abs
	}
	self := store.Self()
	name := o.Name
	if name == "" {
		name = ownerName(self)
	}
	w := &Worker{st: st, o: o, self: self, name: name, state: workerIdle, held: map[int64]*drive{}}
	w.decisions = w.queueDecisions
	w.settle = w.settleFinished
	return w, nil
}

// Name is the worker's name in the queue log.
func (w *Worker) Name() string { return w.name }

// Run works the queue until ctx is done, then drains: it takes no more
// jobs, hands each run it holds back to the queue at the run's next step
// boundary — or mid-step once Grace is over, which a resume treats like a
// crash, with nothing lost — and returns when every job has returned.
//
// # Errors
//
// A job engine that cannot start (its tables cannot be made, the
// database cannot be reached) is an error at once; a stop that did not
// complete cleanly is returned at the end.
func (w *Worker) Run(ctx context.Context) error {
	if w.started.Swap(true) {
		return errors.New("fleet: a Worker runs once")
	}
	if err := Migrate(ctx, w.st); err != nil {
		return err
	}
	workers := river.NewWorkers()
	if err := river.AddWorkerSafely(workers, &jobWorker{w: w}); err != nil {
		return fmt.Errorf("fleet: register the run worker: %w", err)
	}
	client, err := river.NewClient(riverpgxv5.New(w.st.Pool()), &river.Config{
		ID:                   fmt.Sprintf("%s-%s", sanitizeID(w.name), store.NewRunID()[4:]),
		Queues:               map[string]river.QueueConfig{Queue: {MaxWorkers: w.o.Concurrency}},
		Workers:              workers,
		JobTimeout:           -1,
		RescueStuckJobsAfter: w.o.RescueAfter,
		FetchPollInterval:    w.o.FetchPoll,
		FetchCooldown:        min(w.o.FetchPoll, river.FetchCooldownDefault),
		MaxAttempts:          maxAttempts,
		Logger:               w.o.Logger,
	})
	if err != nil {
		return fmt.Errorf("fleet: the job engine's client: %w", err)
	}
	w.client = client
	work, stopWork := context.WithCancel(context.WithoutCancel(ctx))
	defer stopWork()
	if err := client.Start(work); err != nil {
		return fmt.Errorf("%w: %s: start the job engine: %v", store.ErrUnavailable, w.st.Name(), err)
	}
	if err := w.settle(work); err != nil {
		w.o.Logger.Warn("fleet: settle the jobs of finished runs", "error", err)
	}
	w.since = time.Now()
	w.setState(workerWorking)
	var wg sync.WaitGroup
	sweep, stopSweep := context.WithCancel(work)
	wg.Go(func() { w.sweepLoop(sweep) })
	wg.Go(func() { w.decisionLoop(sweep) })

	<-ctx.Done()
	w.draining.Store(true)
	w.setState(workerDraining)
	stopped := make(chan error, 1)
	wg.Go(func() { stopped <- client.Stop(context.WithoutCancel(ctx)) })
	grace := time.NewTimer(w.o.Grace)
	defer grace.Stop()
	select {
	case err = <-stopped:
	case <-grace.C:
		w.handBackAll("the worker stopped, and its grace period ended inside a step")
		hard := time.NewTimer(w.o.Grace)
		defer hard.Stop()
		select {
		case err = <-stopped:
		case <-hard.C:
			// A run that did not end when it was cancelled: River
			// cancels the jobs' contexts too, and stops.
			client.StopAndCancel(context.Background())
			err = <-stopped
		}
	}
	stopSweep()
	stopWork()
	wg.Wait()
	w.setState(workerStopped)
	if err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("fleet: stop the job engine: %w", err)
	}
	return nil
}

// sanitizeID keeps a client id to characters River accepts.
func sanitizeID(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			b[i] = '_'
		}
	}
	return string(b)
}

func (w *Worker) setState(s string) {
	w.mu.Lock()
	w.state = s
	w.mu.Unlock()
}

// drive is one run a worker drives, for the length of one job.
type drive struct {
	runID   string
	job     int64
	attempt int
	since   time.Time
	cancel  context.CancelCauseFunc

	mu    sync.Mutex
	step  int
	ended bool
	// fence is the lease the worker took over its own run with, to hand
	// it back: from then on the run's writes are fenced out.
	fence *store.Lease
	why   string
}

// errHandBack is the cause of a run's context when its worker hands it
// back.
var errHandBack = errors.New("fleet: the worker hands the run back to the queue")

// handBack fences the run out of the store — the worker takes the run's
// lease over from itself, so nothing the run writes from now on lands —
// and cancels it. The run then stops where it is, without an outcome;
// the job is snoozed back to the queue when the drive returns. A fence
// that cannot be taken (the database is gone) leaves the run be: its
// lease lapses if the worker dies, and another worker resumes it.
func (w *Worker) handBack(d *drive, why string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.ended || d.fence != nil {
		return
	}
	l, err := w.st.Acquire(context.Background(), d.runID, w.self, w.o.LeaseTTL, true, nil)
	if err != nil {
		w.o.Logger.Warn("fleet: cannot fence a run to hand it back", "run", d.runID, "error", err)
		return
	}
	d.fence, d.why = l, why
	d.cancel(errHandBack)
}

// handBackAll hands back every run the worker holds.
func (w *Worker) handBackAll(why string) {
	w.mu.Lock()
	drives := make([]*drive, 0, len(w.held))
	for _, d := range w.held {
		drives = append(drives, d)
	}
	w.mu.Unlock()
	for _, d := range drives {
		w.handBack(d, why)
	}
}

// jobWorker is River's view of the worker.
type jobWorker struct {
	river.WorkerDefaults[Args]
	w *Worker
}

// Work implements river.Worker.
func (j *jobWorker) Work(ctx context.Context, job *river.Job[Args]) error { return j.w.work(ctx, job) }

// Timeout implements river.Worker: a run takes as long as it takes.
func (j *jobWorker) Timeout(*river.Job[Args]) time.Duration { return -1 }

// NextRetry implements river.Worker: a failed attempt — a workspace this
// worker cannot reach, a store that failed — is retried soon, by any
// worker, within a minute at most.
func (j *jobWorker) NextRetry(job *river.Job[Args]) time.Time {
	return time.Now().Add(min(time.Duration(1<<min(job.Attempt, 6))*time.Second, time.Minute))
}

// decodeArgs reads a job's encoded arguments.
func decodeArgs(raw []byte, a *Args) error {
	dec := json.NewDecoder(bytes.NewReader(raw))
	return dec.Decode(a)
}

// work is one job: the run checked, its workspace reached, the run driven
// with harness.Resume — which carries out a decision the run awaited, for
// a decision's job — and the job ended by what came of it.
func (w *Worker) work(ctx context.Context, job *river.Job[Args]) error {
	args := job.Args
	if w.draining.Load() {
		return river.JobSnooze(0) // fetched as the worker stopped: not claimed
	}
	w.driven.Add(1)
	logq := func(action, format string, a ...any) {
		e := &postgres.QueueEntry{RunID: args.RunID, Action: action, Worker: w.name, Job: job.ID, Attempt: job.Attempt,
			Detail: fmt.Sprintf(format, a...)}
		if err := w.st.Log(context.WithoutCancel(ctx), e); err != nil {
			w.o.Logger.Warn("fleet: queue log", "run", args.RunID, "action", action, "error", err)
		}
	}
	rec, err := w.st.Run(ctx, args.RunID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return river.JobCancel(fmt.Errorf("fleet: run %s is not in %s", args.RunID, w.st.Name()))
	case err != nil:
		return err
	case rec.Status == store.StatusFinished && args.Rescue != 0 && args.RequestID == "":
		return w.complete(ctx, job, true, ActionFinished, "%s after %d step(s); job %d, whose worker died after the outcome, is completed",
			rec.Outcome, rec.Steps, args.Rescue)
	case rec.Status == store.StatusFinished && args.RequestID == "":
		return w.complete(ctx, job, false, ActionFinished, "the run had already finished (%s); nothing to do", rec.Outcome)
	case rec.Status == store.StatusPaused && args.RequestID == "":
		logq(ActionPaused, "the run still awaits a decision; nothing to do until one is queued")
		return nil
	}
	sub, err := w.st.Submission(ctx, args.RunID)
	if errors.Is(err, store.ErrNotFound) {
		logq(ActionRefused, "the run was not submitted to the queue, so no worker has its spec")
		return river.JobCancel(err)
	} else if err != nil {
		return err
	}
	opts, err := w.options(sub)
	if err != nil {
		logq(ActionRefused, "the submitted spec cannot drive the run here: %v", err)
		return river.JobCancel(err)
	}
	var task harness.TaskContract
	if err := json.Unmarshal(rec.Task, &task); err != nil {
		logq(ActionRefused, "the stored task is corrupt: %v", err)
		return river.JobCancel(err)
	}
	dir, err := w.reach(ctx, rec, &task, sub, logq)
	if err != nil {
		var conflict *store.LeaseError
		if errors.As(err, &conflict) {
			return w.snoozeHeld(ctx, rec.ID, logq)
		}
		logq(ActionRefused, "%v; left for another worker", err)
		return err
	}
	logq(ActionClaimed, "attempt %d; the workspace is %s", job.Attempt, dir)

	d := &drive{runID: rec.ID, job: job.ID, attempt: job.Attempt, since: time.Now()}
	dctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	d.cancel = cancel
	opts.Observer = func(e harness.Event) {
		if e.Kind != harness.EventStepStarted {
			return
		}
		d.mu.Lock()
		d.step = e.Step
		d.mu.Unlock()
		if w.draining.Load() {
			w.handBack(d, fmt.Sprintf("the worker stopped; handed back at the start of step %d", e.Step))
		}
	}
	w.mu.Lock()
	w.held[job.ID] = d
	draining := w.draining.Load()
	w.mu.Unlock()
	if draining {
		w.handBack(d, "the worker stopped before the run began")
	}
	res, err := harness.Resume(dctx, rec.ID, opts, harness.ResumeOptions{})
	w.mu.Lock()
	delete(w.held, job.ID)
	w.mu.Unlock()
	d.mu.Lock()
	d.ended = true
	fence, why := d.fence, d.why
	d.mu.Unlock()

	if fence != nil {
		if err := w.st.Release(context.WithoutCancel(ctx), fence); err != nil {
			w.o.Logger.Warn("fleet: release a handed-back run", "run", rec.ID, "error", err)
		}
		logq(ActionHandedBack, "%s", why)
		return river.JobSnooze(0)
	}
	if err != nil {
		return w.failed(ctx, rec.ID, err, logq)
	}
	if w.afterOutcome != nil {
		w.afterOutcome()
	}
	out := res.Outcome
	if out.Kind == harness.AwaitingApproval {
		return w.complete(ctx, job, false, ActionPaused, "awaiting a decision on request %s; the worker is free", out.RequestID)
	}
	if sub.Workspace == "upload" {
		if err := w.storeResult(ctx, rec.ID, dir); err != nil {
			logq(ActionFailed, "store the workspace the run left: %v; retried", err)
			return err
		}
		logq(ActionStoredResult, "the workspace %s is stored for fetch", dir)
	}
	return w.complete(ctx, job, false, ActionFinished, "%s after %d step(s), %d tokens", out.Kind, out.Steps, out.Usage.Total())
}

// complete ends a job whose run has its outcome: it completes the job —
// and the job it rescues, if that one is still running — and logs the
// queue action, in one transaction, so that no crash leaves one without
// the other. A job already completed (by a worker that settled it) logs
// nothing; so does a rescue, when rescued is set, whose rescued job
// another already settled.
func (w *Worker) complete(ctx context.Context, job *river.Job[Args], rescued bool, action, format string, a ...any) error {
	ctx = context.WithoutCancel(ctx)
	e := &postgres.QueueEntry{RunID: job.Args.RunID, Action: action, Worker: w.name, Attempt: job.Attempt, Detail: fmt.Sprintf(format, a...)}
	err := w.st.Enqueue(ctx, e, func(ctx context.Context, tx pgx.Tx) (int64, error) {
		ids := []int64{job.ID}
		if job.Args.Rescue != 0 {
			ids = append(ids, job.Args.Rescue)
		}
		// Locked, so that workers settling the same job see each other's
		// completion.
		rows, err := tx.Query(ctx, `SELECT id FROM river_job WHERE id = ANY($1) AND state = 'running' ORDER BY id FOR UPDATE`, ids)
		if err != nil {
			return 0, err
		}
		running, err := pgx.CollectRows(rows, pgx.RowTo[int64])
		if err != nil {
			return 0, err
		}
		for _, id := range running {
			j := &river.Job[Args]{JobRow: &rivertype.JobRow{ID: id, State: rivertype.JobStateRunning}}
			if _, err := river.JobCompleteTx[*riverpgxv5.Driver](ctx, tx, j); err != nil {
				return 0, err
			}
		}
		if !slices.Contains(running, job.ID) || rescued && !slices.Contains(running, job.Args.Rescue) {
			return 0, nil
		}
		return job.ID, nil
	})
	if err != nil {
		w.o.Logger.Warn("fleet: complete a job", "run", job.Args.RunID, "job", job.ID, "error", err)
	}
	return err
}

// settleFinished queues a rescue job for each of the queue's jobs that
// River counts as running although its run has finished: its worker died
// after the outcome committed and before the job completed, which would
// otherwise wait for River's rescuer (RescueAfter). The rescue completes
// that job and logs the run's finished line (see complete). A rescue is
// unique per job, so workers that start together queue it once; a job a
// live worker is just completing is completed once, with one line.
func (w *Worker) settleFinished(ctx context.Context) error {
	res, err := w.client.JobList(ctx, river.NewJobListParams().Kinds(Kind).Queues(Queue).
		States(rivertype.JobStateRunning).First(10_000))
	if err != nil {
		return err
	}
	for _, j := range res.Jobs {
		var a Args
		if err := decodeArgs(j.EncodedArgs, &a); err != nil {
			continue // not a job of ours to settle
		}
		rec, err := w.st.Run(ctx, a.RunID)
		if errors.Is(err, store.ErrNotFound) {
			continue
		} else if err != nil {
			return err
		}
		if rec.Status != store.StatusFinished {
			continue
		}
		e := &postgres.QueueEntry{RunID: a.RunID, Action: ActionRescued, Worker: w.name,
			Detail: fmt.Sprintf("the run has finished (%s), and job %d, which %s took, is still running: a rescue job is queued to complete it",
				rec.Outcome, j.ID, strings.Join(j.AttemptedBy, ", "))}
		if err := w.st.Enqueue(ctx, e, enqueue(w.client, Args{RunID: a.RunID, Rescue: j.ID})); err != nil {
			return err
		}
	}
	return nil
}

// failed ends a job whose run could not be driven: a run another driver
// holds is snoozed until its lease can lapse; one that can never be
// driven here — a spec or task that cannot be used — is cancelled;
// anything else is retried.
func (w *Worker) failed(ctx context.Context, runID string, err error, logq func(string, string, ...any)) error {
	switch {
	case errors.Is(err, harness.ErrConflict):
		return w.snoozeHeld(ctx, runID, logq)
	case errors.Is(err, harness.ErrConfig), errors.Is(err, harness.ErrRefused), errors.Is(err, harness.ErrResume):
		logq(ActionRefused, "the run cannot be driven: %v", err)
		return river.JobCancel(err)
	}
	logq(ActionFailed, "%v; retried", err)
	return err
}

// snoozeHeld snoozes a job whose run another driver holds until that
// driver's lease would lapse, by the database's clock.
func (w *Worker) snoozeHeld(ctx context.Context, runID string, logq func(string, string, ...any)) error {
	wait := time.Second
	holder := "nobody now"
	if l, err := w.st.Lease(ctx, runID); err == nil && l != nil {
		if now, err := w.st.Now(ctx); err == nil {
			wait = min(max(l.Expires.Sub(now)+time.Second, time.Second), 2*w.o.LeaseTTL+time.Second)
		}
		holder = fmt.Sprintf("%s (lease generation %d)", ownerName(l.Owner), l.Generation)
	}
	logq(ActionSnoozed, "the run is driven by %s; snoozed %s, until its lease is renewed or lapses", holder, wait.Round(time.Millisecond))
	return river.JobSnooze(wait)
}

// options builds a run's options from its submitted spec and the
// worker's environment (see specOptions), for the worker.
func (w *Worker) options(sub *postgres.Submission) (harness.Options, error) {
	opts, err := specOptions(sub.Spec, w.o.LookupEnv)
	if err != nil {
		return harness.Options{}, err
	}
	opts.LeaseTTL = w.o.LeaseTTL
	opts.Store = w.st
	opts.LookupEnv = w.mcpEnv()
	return opts, nil
}

// specOptions builds a run's options from a submitted spec and a
// worker's environment, lookup: what a worker refuses here it refuses
// for good, and Submit refuses it first. The stored policy rules (the
// submission's), so the spec's is not passed again.
//
// A submitted spec is the submitter's, the environment the worker's: a
// spec that names a base URL gets no key from the environment, since the
// key would go to a server the submitter chose.
func specOptions(spec []byte, lookup func(string) (string, bool)) (harness.Options, error) {
	var s harness.Spec
	dec := json.NewDecoder(bytes.NewReader(spec))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&s); err != nil {
		return harness.Options{}, &harness.Error{Kind: harness.ErrConfig, Field: "spec", Message: err.Error()}
	}
	endpoint := namesEndpoint(&s)
	if endpoint != "" && lookup != nil {
		lookup = withoutKeys(lookup)
	}
	opts, err := s.Options(lookup)
	if err != nil {
		var he *harness.Error
		if endpoint != "" && errors.As(err, &he) && strings.HasSuffix(he.Field, "api_key") {
			return harness.Options{}, &harness.Error{Kind: harness.ErrConfig, Field: endpoint,
				Message: "a submitted spec that names its own base_url gets no key from the worker's environment, which would send the key to a server the submitter chose; give the workers the base URL in their environment instead (OPENAI_BASE_URL, ...)"}
		}
		return harness.Options{}, err
	}
	opts.Policy = nil
	opts.Approver = approve.DeferAll()
	opts.LookupEnv = nil
	return opts, nil
}

// anyWorker stands for the environment of a worker that Submit checks a
// spec against: every provider's key, model and base URL is set, as a
// worker may set them; nothing else is.
func anyWorker(name string) (string, bool) {
	switch {
	case slices.Contains(keyVars, name):
		return "key", true
	case slices.Contains(modelVars, name):
		return "model", true
	case slices.Contains(baseURLVars, name):
		return "https://worker.invalid/v1", true
	}
	return "", false
}

// keyVars are the environment variables that hold provider keys.
var keyVars = []string{openai.EnvAPIKey, openai.EnvCompatibleAPIKey, anthropic.EnvAPIKey, openrouter.EnvAPIKey}

// modelVars and baseURLVars are the environment variables that hold
// providers' models and base URLs.
var (
	modelVars   = []string{openai.EnvModel, openai.EnvCompatibleModel, anthropic.EnvModel, openrouter.EnvModel}
	baseURLVars = []string{openai.EnvBaseURL, openai.EnvCompatibleBaseURL, anthropic.EnvBaseURL, openrouter.EnvBaseURL}
)

// withoutKeys is lookup without the provider keys.
func withoutKeys(lookup func(string) (string, bool)) func(string) (string, bool) {
	return func(name string) (string, bool) {
		if slices.Contains(keyVars, name) {
			return "", false
		}
		return lookup(name)
	}
}

// namesEndpoint returns the field of the first provider of s that names
// its own base URL, or "".
func namesEndpoint(s *harness.Spec) string {
	if s.Provider.BaseURL != "" {
		return "provider.base_url"
	}
	for i, f := range s.Fallbacks {
		if f.BaseURL != "" {
			return fmt.Sprintf("fallbacks[%d].base_url", i)
		}
	}
	return ""
}

// mcpEnv reads, for MCP servers' ${NAME} references, only the variables
// MCPEnv names.
func (w *Worker) mcpEnv() func(string) (string, bool) {
	if w.o.LookupEnv == nil || len(w.o.MCPEnv) == 0 {
		return nil
	}
	return func(name string) (string, bool) {
		if !slices.Contains(w.o.MCPEnv, name) {
			return "", false
		}
		return w.o.LookupEnv(name)
	}
}

// inRoots reports whether dir, with its links resolved, is in one of the
// worker's Roots (or there are none).
func (w *Worker) inRoots(dir string) error {
	if len(w.o.Roots) == 0 {
		return nil
	}
	real, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return fmt.Errorf("cannot resolve the workspace %s: %v", dir, err)
	}
	for _, root := range w.o.Roots {
		r, err := filepath.EvalSymlinks(root)
		if err != nil {
			continue
		}
		if rel, err := filepath.Rel(r, real); err == nil && filepath.IsLocal(rel) {
			return nil
		}
	}
	return fmt.Errorf("the workspace %s (%s) is outside the directories this worker works in (%s)", dir, real, strings.Join(w.o.Roots, ", "))
}

// reach makes sure the worker reaches the run's workspace and returns
// it: a shared path must be there; an uploaded workspace is materialised
// under Workspaces unless it already is, which moves the run there.
func (w *Worker) reach(ctx context.Context, rec *store.Run, task *harness.TaskContract, sub *postgres.Submission, logq func(string, string, ...any)) (string, error) {
	dir := workspaceDir(task)
	if sub.Workspace == "upload" {
		if w.o.Workspaces == "" {
			return "", fmt.Errorf("the run's workspace was uploaded, and this worker has no directory for workspaces (--workspaces)")
		}
		local := filepath.Join(w.o.Workspaces, rec.ID)
		if dir == local && isDir(local) {
			return local, nil
		}
		if rec.Steps > 0 && !isDir(dir) {
			return "", fmt.Errorf("the run's workspace is %s, on a disk this worker does not share, and %d step(s) of it are committed", dir, rec.Steps)
		}
		if rec.Steps > 0 {
			return dir, nil // another worker's directory, which this worker shares
		}
		return w.materialise(ctx, rec.ID, local, logq)
	}
	fi, err := os.Stat(dir)
	switch {
	case err != nil:
		return "", fmt.Errorf("cannot reach the workspace %s: %v", dir, err)
	case !fi.IsDir():
		return "", fmt.Errorf("the workspace %s is not a directory here", dir)
	}
	if _, err := os.ReadDir(dir); err != nil {
		return "", fmt.Errorf("cannot read the workspace %s: %v", dir, err)
	}
	if err := w.inRoots(dir); err != nil {
		return "", err
	}
	return dir, nil
}

// materialise unpacks a run's uploaded workspace into local and moves the
// run there, under the run's lease.
func (w *Worker) materialise(ctx context.Context, runID, local string, logq func(string, string, ...any)) (string, error) {
	l, err := w.st.Acquire(ctx, runID, w.self, w.o.LeaseTTL, false, nil)
	if err != nil {
		return "", err
	}
	defer w.st.Release(context.WithoutCancel(ctx), l)
	snap, err := w.st.Snapshot(ctx, runID, "input")
	if err != nil {
		return "", err
	}
	os.RemoveAll(local) // a half workspace of an attempt that died
	files, err := unpack(snap.Data, local)
	if err != nil {
		return "", err
	}
	if err := w.st.Relocate(ctx, l, local); err != nil {
		return "", err
	}
	logq(ActionMaterialised, "the uploaded workspace (%d files) is at %s", files, local)
	return local, nil
}

// storeResult stores the workspace a finished uploaded run left.
func (w *Worker) storeResult(ctx context.Context, runID, dir string) error {
	data, files, size, err := pack(dir)
	if err != nil {
		return err
	}
	return w.st.PutSnapshot(ctx, &postgres.Snapshot{RunID: runID, Kind: "result", Data: data, Files: files, Bytes: size})
}

func isDir(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}

// sweepLoop looks for lapsed runs every half lease ttl until ctx is done.
func (w *Worker) sweepLoop(ctx context.Context) {
	t := time.NewTicker(max(w.o.LeaseTTL/2, 50*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := w.sweep(ctx); err != nil && ctx.Err() == nil {
			w.o.Logger.Warn("fleet: sweep for lapsed runs", "error", err)
		}
	}
}

// decisionLoop queues the jobs of the decisions that wait for a worker,
// at once and then as often as the worker polls for jobs.
func (w *Worker) decisionLoop(ctx context.Context) {
	t := time.NewTicker(w.o.FetchPoll)
	defer t.Stop()
	for {
		if err := w.decisions(ctx); err != nil && ctx.Err() == nil {
			w.o.Logger.Warn("fleet: queue the decided runs", "error", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// queueDecisions queues a job for each decision on a request of a paused
// submitted run — recorded, by harness.Decide, in any process — which the
// worker that claims it carries out by resuming the run. A request gets
// one job, ever, so that workers that find it at once queue it once; the
// queue log's line names the decision and who made it.
func (w *Worker) queueDecisions(ctx context.Context) error {
	decided, err := w.st.Decided(ctx, 1000)
	if err != nil {
		return err
	}
	for _, d := range decided {
		var rec struct {
			Kind approve.Kind `json:"kind"`
			By   string       `json:"by"`
		}
		json.Unmarshal(d.Decision, &rec) // one that does not decode is named by its request alone
		detail := fmt.Sprintf("%s on request %s", rec.Kind, d.RequestID)
		if rec.By != "" {
			detail += ", by " + rec.By
		}
		e := &postgres.QueueEntry{RunID: d.RunID, Action: ActionDecisionQueued, Worker: w.name, Detail: detail}
		if err := w.st.Enqueue(ctx, e, enqueue(w.client, Args{RunID: d.RunID, RequestID: d.RequestID})); err != nil {
			return err
		}
	}
	return nil
}

// sweep enqueues a rescue job for each submitted run that nobody drives —
// never claimed, or whose lease lapsed: expired, by the database's clock,
// a lease ttl ago, or held by a process on this host that has died — when
// no job waits for the run and River still counts one of its jobs as
// running a lease ttl after a worker took it: that worker died with it.
// A run whose jobs all ended (refused by every worker, cancelled) is
// left alone: it is stalled, for a person to look at. A rescue is unique
// per job rescued, so workers sweeping at once enqueue it once.
func (w *Worker) sweep(ctx context.Context) error {
	leases, now, err := w.st.Unheld(ctx, w.self.Host, w.o.LeaseTTL)
	if err != nil || len(leases) == 0 {
		return err
	}
	var lapsed []store.Lease
	var ids []string
	for _, l := range leases {
		if l.Generation == 0 || now.Sub(l.Expires) >= w.o.LeaseTTL || l.Owner.Gone(w.self) {
			lapsed = append(lapsed, l)
			ids = append(ids, l.RunID)
		}
	}
	if len(lapsed) == 0 {
		return nil
	}
	jobs, err := jobsOf(ctx, w.st, ids, append([]rivertype.JobState{rivertype.JobStateRunning}, waiting...))
	if err != nil {
		return err
	}
	for _, l := range lapsed {
		var stale []*rivertype.JobRow
		waits := false
		for _, j := range jobs[l.RunID] {
			switch {
			case j.State != rivertype.JobStateRunning:
				waits = true
			case j.AttemptedAt != nil && now.Sub(*j.AttemptedAt) >= w.o.LeaseTTL:
				stale = append(stale, j)
			}
		}
		if waits {
			continue
		}
		why := "no worker claimed the run"
		switch {
		case l.Generation == 0:
		case l.Owner.Gone(w.self):
			why = fmt.Sprintf("the process %s that held the run (lease generation %d) is gone", ownerName(l.Owner), l.Generation)
		default:
			why = fmt.Sprintf("the lease of %s (generation %d) expired at %s", ownerName(l.Owner), l.Generation, l.Expires.UTC().Format(time.RFC3339))
		}
		for _, j := range stale {
			e := &postgres.QueueEntry{RunID: l.RunID, Action: ActionRescued, Worker: w.name,
				Detail: fmt.Sprintf("%s; job %d, which %s took, is still running: a rescue job is queued", why, j.ID, strings.Join(j.AttemptedBy, ", "))}
			if err := w.st.Enqueue(ctx, e, enqueue(w.client, Args{RunID: l.RunID, Rescue: j.ID})); err != nil {
				return err
			}
		}
	}
	return nil
}
